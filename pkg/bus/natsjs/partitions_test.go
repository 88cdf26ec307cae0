package natsjs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
)

// owners counts, per partition, the replicas whose work on it runs: onSet
// starts and stops it, so more than one at any moment is a breach.
type owners struct {
	t      *testing.T
	mu     sync.Mutex
	count  []int
	by     map[string][]int
	breach bool
}

func newOwners(t *testing.T, n int) *owners {
	t.Helper()
	return &owners{t: t, count: make([]int, n), by: map[string][]int{}}
}

func (o *owners) onSet(replica string) func([]int) {
	return func(owned []int) {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, p := range o.by[replica] {
			if !slices.Contains(owned, p) {
				o.count[p]--
			}
		}
		for _, p := range owned {
			if !slices.Contains(o.by[replica], p) {
				o.count[p]++
				if o.count[p] > 1 {
					o.breach = true
					o.t.Errorf("partition %d worked by two replicas at once (%s joined)", p, replica)
				}
			}
		}
		o.by[replica] = slices.Clone(owned)
	}
}

// settled tells whether every partition is worked by exactly one replica,
// one of these, each working some.
func (o *owners) settled(replicas ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.count {
		if c != 1 {
			return false
		}
	}
	covered := 0
	for _, r := range replicas {
		if len(o.by[r]) == 0 {
			return false
		}
		covered += len(o.by[r])
	}
	return covered == len(o.count) // and so by no other replica
}

func (o *owners) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("%v", o.by)
}

// partitionOptions are the tests' options of replica name among n
// partitions: leases of 1.2 s, renewed every 0.3 s, given up after 0.9 s
// without a renewal.
func partitionOptions(name string, n int) natsjs.PartitionOptions {
	return natsjs.PartitionOptions{Replica: name, Count: n, LeaseDuration: 1200 * time.Millisecond, RenewDeadline: 900 * time.Millisecond, Renew: 300 * time.Millisecond}
}

func waitSettled(t *testing.T, o *owners, within time.Duration, replicas ...string) time.Duration {
	t.Helper()
	start := time.Now()
	for !o.settled(replicas...) {
		if time.Since(start) > within {
			t.Fatalf("partitions not settled on %v within %v: %s", replicas, within, o)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// The waits are generous (a loaded machine delays renewals, which only
// delays handovers); the times they took are logged. The exclusivity
// checks are strict.
//
// Three replicas share 12 partitions, each held by one; a replica killed
// (no release) has its partitions taken over within the lease's time, a
// replica that leaves hands them over at once, one that joins takes its
// share; never two replicas on one partition.
func TestPartitionsAreSharedAndHandedOver(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	const n = 12
	own := newOwners(t, n)
	join := func(name string) *natsjs.Partitions {
		t.Helper()
		p, err := open(t, o).JoinPartitions(ctx, partitionOptions(name, n), own.onSet(name), nil) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := join("a"), join("b"), join("c")
	waitSettled(t, own, 20*time.Second, "a", "b", "c")
	t.Logf("three replicas: %s", own)

	b.Crash()
	took := waitSettled(t, own, 20*time.Second, "a", "c")
	t.Logf("b killed: its partitions worked again after %v: %s", took.Round(time.Millisecond), own)

	if err := c.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	took = waitSettled(t, own, 20*time.Second, "a")
	t.Logf("c left: a works every partition after %v", took.Round(time.Millisecond))

	d := join("d")
	took = waitSettled(t, own, 20*time.Second, "a", "d")
	t.Logf("d joined: shared after %v: %s", took.Round(time.Millisecond), own)
	for _, p := range []*natsjs.Partitions{a, d} {
		if err := p.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if own.breach {
		t.Error("a partition was worked by two replicas at once")
	}
}

// A replica cut off from NATS stops its partitions' work within the renew
// deadline, before the others take them over.
func TestACutOffReplicaStopsBeforeOthersTakeOver(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	const n = 8
	own := newOwners(t, n)
	a, err := open(t, o).JoinPartitions(ctx, partitionOptions("a", n), own.onSet("a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Leave(ctx) }()
	nc, err := nats.Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	bb, err := natsjs.Open(ctx, nc, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bb.JoinPartitions(ctx, partitionOptions("b", n), own.onSet("b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, own, 20*time.Second, "a", "b")
	nc.Close() // b is cut off: it cannot renew
	took := waitSettled(t, own, 20*time.Second, "a")
	if got := b.Owned(); len(got) != 0 {
		t.Errorf("b, cut off, still works %v", got)
	}
	t.Logf("b cut off: a works every partition after %v", took.Round(time.Millisecond))
	b.Crash()
	_ = bb.Close()
}

// A replica whose partitions' work is slow to stop (a run in flight that
// it waits for) keeps renewing its leases meanwhile: those it keeps are
// not taken over as if it were gone, and those it hands over are not
// claimed before their work has stopped. Without that, a stop longer than
// the lease's time let another replica work the same partitions.
func TestASlowStopKeepsRenewing(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	const n = 8
	own := newOwners(t, n)
	const stop = 4 * time.Second // over three lease durations
	slowA := own.onSet("a")
	var mu sync.Mutex
	var was []int
	onSetA := func(owned []int) {
		mu.Lock()
		shrinks := len(owned) < len(was)
		was = slices.Clone(owned)
		mu.Unlock()
		if shrinks {
			time.Sleep(stop) // the stopping partitions' work still runs
		}
		slowA(owned)
	}
	a, err := open(t, o).JoinPartitions(ctx, partitionOptions("a", n), onSetA, nil) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
	if err != nil {
		t.Fatal(err)
	}
	waitSettled(t, own, 20*time.Second, "a")
	b, err := open(t, o).JoinPartitions(ctx, partitionOptions("b", n), own.onSet("b"), nil) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
	if err != nil {
		t.Fatal(err)
	}
	took := waitSettled(t, own, 20*time.Second, "a", "b")
	t.Logf("b joined while a took %v to stop its share: shared after %v: %s", stop, took.Round(time.Millisecond), own)
	if took < stop {
		t.Errorf("shared after %v, before a's work on b's share had stopped (%v)", took, stop)
	}
	for _, p := range []*natsjs.Partitions{a, b} {
		if err := p.Leave(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if own.breach {
		t.Error("a partition was worked by two replicas at once")
	}
}
