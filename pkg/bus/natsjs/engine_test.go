package natsjs_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus/natsjs"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

const typeStep = "dev.flotilla.natsjs.step.v1"

// ledger records the handling of steps by replicas: every step handled, in
// each rollout's order, and never two replicas in one rollout at once.
type ledger struct {
	t       *testing.T
	mu      sync.Mutex
	active  map[string]string // rollout -> replica handling it
	next    map[string]int    // rollout -> next step expected first time
	handled map[string]int    // event id -> times
	started map[string]bool   // event id -> its handling began
	by      map[string]int    // replica -> calls
}

func (l *ledger) fn(replica string) dispatch.Function {
	return step{name: "step", handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		r := events.RolloutID(e)
		n, _ := strconv.Atoi(e.Subject())
		l.mu.Lock()
		if other, busy := l.active[r]; busy {
			l.t.Errorf("%s handles rollout %s while %s does", replica, r, other)
		}
		l.active[r] = replica
		if !l.started[e.ID()] { // a replay (after a stop) may start it again
			l.started[e.ID()] = true
			if n != l.next[r] {
				l.t.Errorf("rollout %s: step %d handled before step %d", r, n, l.next[r])
			}
			l.next[r] = n + 1
		}
		l.mu.Unlock()
		select { // a step's work
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			l.mu.Lock()
			delete(l.active, r)
			l.mu.Unlock()
			return nil, ctx.Err()
		}
		l.mu.Lock()
		delete(l.active, r)
		l.handled[e.ID()]++
		l.by[replica]++
		l.mu.Unlock()
		return nil, nil
	}}
}

func (l *ledger) calls(replica string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[replica]
}

func (l *ledger) done(ids []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if l.handled[id] == 0 {
			return false
		}
	}
	return true
}

type step struct {
	name   string
	handle func(context.Context, cloudevents.Event) ([]cloudevents.Event, error)
}

func (s step) Name() string       { return s.name }
func (s step) Consumes() []string { return []string{typeStep} }
func (s step) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	return s.handle(ctx, e)
}

// Three replicas share the engine's work on a partitioned stream: every
// rollout's steps are handled, in order, by one replica at a time, while
// one replica is killed mid-way and its partitions are taken over.
func TestReplicasShareTheEngine(t *testing.T) {
	ctx := context.Background()
	o := newOptions()
	o.Partitions = 8
	o.PartitionKey = dispatch.Key
	l := &ledger{t: t, active: map[string]string{}, next: map[string]int{}, handled: map[string]int{}, started: map[string]bool{}, by: map[string]int{}}
	type replica struct {
		parts  *natsjs.Partitions
		shards *dispatch.Shards
	}
	start := func(name string) replica {
		b := open(t, o) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
		sh := dispatch.NewShards(ctx, func(p int) (dispatch.Journal, error) { return b.Partition(p) },
			[]dispatch.Function{l.fn(name)}, dispatch.Options{Workers: 4})
		parts, err := b.JoinPartitions(ctx, natsjs.PartitionOptions{Replica: name, Count: o.Partitions,
			LeaseDuration: 1200 * time.Millisecond, RenewDeadline: 900 * time.Millisecond, Renew: 300 * time.Millisecond}, sh.Set, nil)
		if err != nil {
			t.Fatal(err)
		}
		return replica{parts, sh}
	}
	rs := map[string]replica{"a": start("a"), "b": start("b"), "c": start("c")}
	for settled := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		held := 0
		for _, r := range rs {
			if n := len(r.shards.Running()); n > 0 {
				held += n
			}
		}
		if held == o.Partitions && len(rs["a"].shards.Running()) > 0 && len(rs["b"].shards.Running()) > 0 && len(rs["c"].shards.Running()) > 0 {
			break
		}
		if time.Now().After(settled) {
			t.Fatal("the partitions were not shared among the three replicas")
		}
	}
	producer := open(t, o)
	var ids []string
	post := func(from, to int) {
		for n := from; n < to; n++ {
			var evs []cloudevents.Event
			for r := range 20 {
				id := fmt.Sprintf("r%02d-%03d", r, n)
				e, err := events.New(id, "/test", typeStep, map[string]int{"n": n})
				if err != nil {
					t.Fatal(err)
				}
				e.SetExtension(events.ExtRolloutID, fmt.Sprintf("r%02d", r))
				e.SetSubject(strconv.Itoa(n))
				evs = append(evs, e)
				ids = append(ids, id)
			}
			if _, err := producer.Append(ctx, evs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	post(0, 10)
	for l.calls("b") < 20 {
		time.Sleep(5 * time.Millisecond)
	}
	rs["b"].parts.Crash() // killed mid-way: its dispatchers stop, its leases are left
	post(10, 20)
	deadline := time.Now().Add(30 * time.Second)
	for !l.done(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("not every step handled within 30s: %d replica calls %v", len(l.handled), l.by)
		}
		time.Sleep(20 * time.Millisecond)
	}
	replays := 0
	for _, n := range l.handled {
		replays += n - 1
	}
	t.Logf("%d steps of 20 rollouts handled (%d again after the handover); calls by replica %v", len(ids), replays, l.by)
	for _, r := range rs {
		r.shards.Close()
		_ = r.parts.Leave(ctx)
	}
}
