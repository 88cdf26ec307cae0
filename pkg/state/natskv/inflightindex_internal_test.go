package natskv

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// countingBucket counts the values read with Get.
type countingBucket struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (b *countingBucket) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	b.gets.Add(1)
	return b.KeyValue.Get(ctx, key)
}

// The index lists the rollouts in flight as another connection wrote them
// (created, updated, deleted), each a copy of its own, and reads only the
// values that changed since it last decoded them: a list with no change
// reads none.
func TestInFlightIndexReadsOnlyWhatChanged(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	bucket := connectedBucket(ctx, t, "ROLLOUTS")
	reader := &countingBucket{KeyValue: bucket()}
	writer := bucket()
	put := func(id, phase string) {
		t.Helper()
		raw, err := json.Marshal(envelope{Rollout: rollout.Rollout{ID: id, Application: "app", Phase: rollout.Phase(phase)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writer.Put(ctx, idKey(id), raw); err != nil {
			t.Fatal(err)
		}
	}
	x := newInFlightIndex(reader)
	check := func(step string, want []string, wantGets int64) {
		t.Helper()
		reader.gets.Store(0)
		got, ok, err := x.list(ctx)
		if err != nil || !ok {
			t.Fatalf("%s: list: ok %v, %v", step, ok, err)
		}
		var ids []string
		for _, s := range got {
			ids = append(ids, s.env.Rollout.ID+"="+string(s.env.Rollout.Phase))
		}
		if diff := cmp.Diff(want, ids); diff != "" || reader.gets.Load() != wantGets {
			t.Errorf("%s: (-want +got):\n%s values read: %d, want %d", step, diff, reader.gets.Load(), wantGets)
		}
	}
	put("a", "Progressing")
	put("b", "Progressing")
	want := []string{"a=Progressing", "b=Progressing"}
	if idKey("a") > idKey("b") {
		want = []string{"b=Progressing", "a=Progressing"}
	}
	check("first", want, 2)
	check("unchanged", want, 0)

	got, _, _ := x.list(ctx)
	got[0].env.Rollout.Phase = "Mangled"
	check("a caller's change", want, 0)

	put("b", "Paused")
	put("c", "Progressing")
	if err := writer.Delete(ctx, idKey("a")); err != nil {
		t.Fatal(err)
	}
	want = []string{"b=Paused", "c=Progressing"}
	if idKey("b") > idKey("c") {
		want = []string{"c=Progressing", "b=Paused"}
	}
	check("written by another", want, 2)
	check("unchanged again", want, 0)
}

// stalledBucket's first watch delivers the bucket's first revisions and
// then nothing, as a watch on a replica that stays behind; later ones
// deliver all of them.
type stalledBucket struct {
	jetstream.KeyValue
	watches int
	stopped atomic.Int64
}

type stopCounted struct {
	ch      chan jetstream.KeyValueEntry
	stopped *atomic.Int64
}

func (w stopCounted) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w stopCounted) Stop() error {
	if w.stopped.Add(1) == 1 {
		close(w.ch)
	}
	return nil
}

func (b *stalledBucket) Status(context.Context) (jetstream.KeyValueStatus, error) {
	return status{msgs: 3, last: 3}, nil
}

func (b *stalledBucket) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	b.watches++
	ch := make(chan jetstream.KeyValueEntry, 4)
	last := 3
	if b.watches == 1 {
		last = 1
	}
	for i := 1; i <= last; i++ {
		ch <- entry{key: string(rune('a' + i - 1)), rev: uint64(i)}
	}
	ch <- nil
	if b.watches == 1 {
		return stopCounted{ch, &b.stopped}, nil
	}
	return watcher{ch}, nil
}

// A watch that stays behind the leader's last revision is given up after
// catchUpFor (the caller reads the bucket itself) and stopped; the next
// read starts another, which catches up.
func TestAStalledWatchIsMadeAgain(t *testing.T) {
	b := &stalledBucket{}
	f := &follower{kv: b, what: "test", load: func([]jetstream.KeyValueEntry) {}, apply: func(jetstream.KeyValueEntry) {}}
	if f.upToDate(t.Context()) {
		t.Fatal("up to date with a watch at revision 1 of 3")
	}
	if b.stopped.Load() != 1 {
		t.Errorf("the stalled watch was stopped %d times, want 1", b.stopped.Load())
	}
	if !f.upToDate(t.Context()) {
		t.Fatal("not up to date with a new watch at revision 3 of 3")
	}
	if b.watches != 2 {
		t.Errorf("%d watches, want 2", b.watches)
	}
}

// silentBucket's watches are made and never deliver anything.
type silentBucket struct{ stalledBucket }

func (b *silentBucket) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	b.watches++
	return stopCounted{make(chan jetstream.KeyValueEntry), &b.stopped}, nil
}

// A watch made but silent is given up within catchUpFor (stopped, the
// caller reads the bucket itself), not waited for until the caller's
// deadline.
func TestASilentWatchIsGivenUp(t *testing.T) {
	b := &silentBucket{}
	f := &follower{kv: b, what: "test", load: func([]jetstream.KeyValueEntry) {}, apply: func(jetstream.KeyValueEntry) {}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	if f.upToDate(ctx) {
		t.Fatal("up to date with a watch that delivered nothing")
	}
	if took := time.Since(start); took > 30*time.Second || b.stopped.Load() != 1 {
		t.Errorf("given up after %s with the watch stopped %d times; want well before the caller's minute, stopped once", took, b.stopped.Load())
	}
}
