package natskv

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

// hungBucket's first watches never answer (the consumer's create request
// lost while a leader is elected: nats.go waits for the caller's deadline),
// or answer and then send nothing; later ones deliver its keys.
type hungBucket struct {
	jetstream.KeyValue
	hung, silent int
	keys         []string
	watches      int
}

type entry struct {
	jetstream.KeyValueEntry
	key string
	rev uint64
	op  jetstream.KeyValueOp
}

func (e entry) Key() string                     { return e.key }
func (e entry) Revision() uint64                { return e.rev }
func (e entry) Operation() jetstream.KeyValueOp { return e.op }

type watcher struct{ ch chan jetstream.KeyValueEntry }

func (w watcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w watcher) Stop() error                             { return nil }

// status is a bucket's status as its stream's leader answers it.
type status struct {
	jetstream.KeyValueStatus
	msgs, last uint64
}

func (s status) StreamInfo() *jetstream.StreamInfo {
	return &jetstream.StreamInfo{State: jetstream.StreamState{Msgs: s.msgs, LastSeq: s.last}}
}

func (b *hungBucket) Status(context.Context) (jetstream.KeyValueStatus, error) {
	n := uint64(len(b.keys))
	return status{msgs: n, last: n}, nil
}

func (b *hungBucket) WatchAll(ctx context.Context, _ ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	b.watches++
	if b.watches <= b.hung {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ch := make(chan jetstream.KeyValueEntry, len(b.keys)+1)
	if b.watches <= b.hung+b.silent {
		return watcher{ch}, nil
	}
	for i, k := range b.keys {
		ch <- entry{key: k, rev: uint64(i + 1)}
	}
	ch <- nil
	return watcher{ch}, nil
}

// A watch that hangs, at its creation or while draining, is cut short and
// made again: a plan once waited 3 minutes for the consumer of a watch of
// the rollouts after a NATS node was lost (the scale-out CI's failure: no
// rollout started for a verified push).
func TestReadAllOutlastsAHungWatch(t *testing.T) {
	b := &hungBucket{hung: 1, silent: 1, keys: []string{"a", "b"}}
	got, err := readAllIdle(t.Context(), b, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("readAll: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b"}, keysOf(got)); diff != "" || b.watches < 3 {
		t.Errorf("readAll after %d watches, want 3 or more (-want +got):\n%s", b.watches, diff)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	b = &hungBucket{hung: 1 << 30}
	if _, err := readAllIdle(ctx, b, 50*time.Millisecond); err == nil || b.watches < 2 {
		t.Errorf("readAll of a bucket that never answers = %v after %d watches, want an error once its caller's context ended, having tried again", err, b.watches)
	}
}

// laggingBucket's leader holds a (1), b (2) and a's delete marker (3).
// Its watches are consumers on a replica that applied only a when they
// were made: each delivers a, its end marker, then the rest as the replica
// applies it, unless the replica stays behind (the first stalled ones).
type laggingBucket struct {
	jetstream.KeyValue
	stalled, watches int
}

func (b *laggingBucket) Status(context.Context) (jetstream.KeyValueStatus, error) {
	return status{msgs: 2, last: 3}, nil
}

func (b *laggingBucket) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	b.watches++
	ch := make(chan jetstream.KeyValueEntry, 4)
	ch <- entry{key: "a", rev: 1}
	ch <- nil
	if b.watches > b.stalled {
		go func() {
			time.Sleep(10 * time.Millisecond) // the replica applies the leader's commit
			ch <- entry{key: "b", rev: 2}
			ch <- entry{key: "a", rev: 3, op: jetstream.KeyValueDelete}
		}()
	}
	return watcher{ch}, nil
}

// A watch made on a replica that has not applied the bucket's last writes
// is read on past its end marker until it has delivered the revision the
// leader last wrote: List read no key right after two Puts acknowledged
// (TestDocsListDelete, failing once under load), the watch's consumer
// placed on a replica yet to apply them. One that stays behind is made
// again.
func TestReadAllReadsTheLeadersLastWrite(t *testing.T) {
	for _, stalled := range []int{0, 1} {
		b := &laggingBucket{stalled: stalled}
		got, err := readAllIdle(t.Context(), b, 200*time.Millisecond)
		if err != nil {
			t.Fatalf("readAll: %v", err)
		}
		if diff := cmp.Diff([]string{"b"}, keysOf(got)); diff != "" || b.watches < stalled+1 {
			t.Errorf("readAll after %d watches, %d stalled (-want +got):\n%s", b.watches, stalled, diff)
		}
	}
}

func keysOf(entries []jetstream.KeyValueEntry) []string {
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key())
	}
	return keys
}
