package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// A replica holding several partitions runs a dispatcher for each, and
// Workers still bounds its calls at once, across them all: three
// partitions with two blocked calls ready each run two calls, not six,
// and the others run as those end.
func TestShardsShareTheWorkers(t *testing.T) {
	const parts, workers = 3, 2
	stores := make([]*store.Store, parts)
	for p := range stores {
		stores[p] = newStore(t)
	}
	g := newGated()
	ctx, cancel := context.WithCancel(t.Context())
	sh := dispatch.NewShards(ctx, func(p int) (dispatch.Journal, error) { return stores[p], nil },
		[]dispatch.Function{g}, dispatch.Options{Workers: workers})
	t.Cleanup(func() {
		cancel()
		sh.Set(nil) // waits for the dispatchers to stop
	})
	for p, s := range stores {
		for i := range 2 {
			appendEvents(t, s, rolloutEvent(t, fmt.Sprintf("p%d-%d", p, i), "slow"+fmt.Sprint(p*2+i)))
		}
	}
	sh.Set([]int{0, 1, 2})
	waitCalls(t, g.calls, workers)
	select {
	case id := <-g.calls:
		t.Fatalf("call %s ran beside the %d running: Workers is %d for the whole replica", id, workers, workers)
	case <-time.After(200 * time.Millisecond):
	}
	close(g.release)
	waitCalls(t, g.calls, parts*2-workers)
}
