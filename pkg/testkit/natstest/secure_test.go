package natstest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A secured node takes a client with the test CA, the client certificate
// and the user's credentials, and gives its account JetStream with the
// account JWT's limits.
func TestStartSecured(t *testing.T) {
	c, err := StartSecured(t.Context(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	a := c.Auth()
	nc, err := nats.Connect(c.URL(), nats.UserCredentials(a.CredsFile), nats.RootCAs(a.CAFile), nats.ClientCert(a.CertFile, a.KeyFile))
	if err != nil {
		t.Fatalf("connecting to %s (log %s): %v", c.URL(), c.Log(0), err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	info, err := js.AccountInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := jetstream.AccountLimits{MaxMemory: 64 << 20, MaxStore: 1 << 30, MaxStreams: -1, MaxConsumers: -1, MaxAckPending: -1, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}
	if diff := cmp.Diff(want, info.Limits); diff != "" {
		t.Errorf("account limits (-want +got):\n%s", diff)
	}
}
