package natsjs_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/bus/bustest"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// cluster is the package's three-node JetStream cluster.
var cluster *natstest.Cluster

func TestMain(m *testing.M) { os.Exit(natstest.Main(m, 3, &cluster)) }

var streams atomic.Int64

// connect connects to the cluster, closed at the test's end.
func connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(cluster.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// open connects to the cluster and opens a bus on a stream of the test's
// own, closed at the test's end.
func open(t *testing.T, o natsjs.Options) *natsjs.Bus {
	t.Helper()
	nc, err := nats.Connect(cluster.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := natsjs.Open(ctx, nc, o)
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(); nc.Close() })
	return b
}

func newOptions() natsjs.Options {
	n := streams.Add(1)
	return natsjs.Options{Stream: fmt.Sprintf("T%d", n), Subject: fmt.Sprintf("t%d.events", n)}
}

func TestContract(t *testing.T) {
	for _, parts := range []int{1, 4} {
		t.Run(fmt.Sprintf("partitions=%d", parts), func(t *testing.T) { contract(t, parts) })
	}
}

func contract(t *testing.T, parts int) {
	t.Helper()
	bustest.Run(t, func(t *testing.T) (bus.Bus, func() bus.Bus) {
		t.Helper()
		o := newOptions()
		o.Partitions = parts
		b := open(t, o)
		return b, func() bus.Bus {
			_ = b.Close()
			b = open(t, o)
			return b
		}
	})
}
