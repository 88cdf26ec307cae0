package api_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// TestSharedBearerFailureLimit: two replicas of scale-out mode, each on
// its own connection to a real NATS server, share the limit on failed
// bearer tokens through the documents' KV bucket: the failures an address
// spent on one are refused 429 on the other too (within the watch's
// latency), another address is not, and once the bucket refilled the
// sweep deletes it.
func TestSharedBearerFailureLimit(t *testing.T) {
	ctx := t.Context()
	c, err := natstest.Start(ctx, t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	const burst, every = 3, 300 * time.Millisecond
	replica := func() *api.Authn {
		t.Helper()
		nc, err := nats.Connect(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		docs, err := natskv.OpenDocs(ctx, nc, natskv.Options{Prefix: "FAILURES", Replicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		a, err := api.NewAuthn(map[string]string{"ci": "ci-secret"}, api.BearerFailureLimit(burst, every), api.SharedBearerFailures(docs))
		if err != nil {
			t.Fatal(err)
		}
		if err := a.StartSharedFailures(ctx); err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, b := replica(), replica()
	call := func(z *api.Authn, addr, token string) int {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/rollouts", nil)
		req.RemoteAddr = addr + ":40000"
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		z.Require(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })).ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range burst {
		if code := call(a, "10.0.0.1", "wrong"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d on replica a: %d, want 401", i+1, code)
		}
	}
	if code := call(a, "10.0.0.1", "ci-secret"); code != http.StatusTooManyRequests {
		t.Errorf("replica a after %d failures: %d, want 429", burst, code)
	}
	deadline := time.Now().Add(every / 2) // well before a token refills
	for code := call(b, "10.0.0.1", "ci-secret"); code != http.StatusTooManyRequests; code = call(b, "10.0.0.1", "ci-secret") {
		if time.Now().After(deadline) {
			t.Fatalf("replica b still answers %d to the address replica a limited, want 429", code)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if code := call(b, "10.0.0.2", "ci-secret"); code != http.StatusOK {
		t.Errorf("replica b to another address: %d, want 200", code)
	}
	if n, err := b.SweepFailures(ctx); err != nil || n != 0 {
		t.Errorf("a sweep while the address is limited deleted %d (%v), want none", n, err)
	}
	time.Sleep(burst*every + 100*time.Millisecond)
	if code := call(b, "10.0.0.1", "ci-secret"); code != http.StatusOK {
		t.Errorf("replica b once the bucket refilled: %d, want 200", code)
	}
	if n, err := a.SweepFailures(ctx); err != nil || n != 1 {
		t.Errorf("the sweep after the refill deleted %d (%v), want 1", n, err)
	}
}
