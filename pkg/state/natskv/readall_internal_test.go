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
}

func (e entry) Key() string { return e.key }

type watcher struct{ ch chan jetstream.KeyValueEntry }

func (w watcher) Updates() <-chan jetstream.KeyValueEntry { return w.ch }
func (w watcher) Stop() error                             { return nil }

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
	for _, k := range b.keys {
		ch <- entry{key: k}
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
	var keys []string
	for _, e := range got {
		keys = append(keys, e.Key())
	}
	if diff := cmp.Diff([]string{"a", "b"}, keys); diff != "" || b.watches != 3 {
		t.Errorf("readAll after %d watches (-want +got):\n%s", b.watches, diff)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	b = &hungBucket{hung: 1 << 30}
	if _, err := readAllIdle(ctx, b, 50*time.Millisecond); err == nil || b.watches < 2 {
		t.Errorf("readAll of a bucket that never answers = %v after %d watches, want an error once its caller's context ended, having tried again", err, b.watches)
	}
}
