package natskv_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/state"
	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
	"github.com/flotilla-cd/flotilla/pkg/state/statetest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// cluster is the package's three-node JetStream cluster.
var cluster *natstest.Cluster

func TestMain(m *testing.M) { os.Exit(natstest.Main(m, 3, &cluster)) }

var prefixes atomic.Int64

// replica is one flotilla replica's view: its own connection, the bus and
// the state on the test's buckets.
type replica struct {
	nc   *nats.Conn
	bus  *natsjs.Bus
	repo *natskv.Repo
}

// newPrefix names a test's own stream and buckets.
func newPrefix() string { return fmt.Sprintf("S%d", prefixes.Add(1)) }

func open(t *testing.T, prefix string) replica {
	t.Helper()
	nc, err := nats.Connect(cluster.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := natsjs.Open(ctx, nc, natsjs.Options{Stream: prefix, Subject: prefix + ".events"})
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	repo, err := natskv.Open(ctx, nc, b, natskv.Options{Prefix: prefix}, nil)
	if err != nil {
		_ = b.Close()
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(); nc.Close() })
	return replica{nc: nc, bus: b, repo: repo}
}

func TestStateContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T) (state.Rollouts, bus.Bus) {
		t.Helper()
		r := open(t, newPrefix())
		return r.repo, r.bus
	})
}
