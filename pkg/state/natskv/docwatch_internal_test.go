package natskv

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

// flakyWatches' first watch fails to be made (the consumer's create
// request unanswered while a NATS node restarts: nats.go's own timeout),
// its second delivers nothing, its third delivers the documents and
// stays.
type flakyWatches struct {
	jetstream.KeyValue
	mu      sync.Mutex
	watches int
	values  [][]byte
}

func (f *flakyWatches) Watch(context.Context, string, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watches++
	switch f.watches {
	case 1:
		return nil, context.DeadlineExceeded
	case 2:
		return stoppable{make(chan jetstream.KeyValueEntry)}, nil
	}
	ch := make(chan jetstream.KeyValueEntry, len(f.values)+1)
	for _, v := range f.values {
		ch <- docEntry{v: v}
	}
	ch <- nil
	return stoppable{ch}, nil
}

type docEntry struct {
	jetstream.KeyValueEntry
	v []byte
}

func (e docEntry) Value() []byte { return e.v }

type stoppable struct{ ch chan jetstream.KeyValueEntry }

func (s stoppable) Updates() <-chan jetstream.KeyValueEntry { return s.ch }
func (s stoppable) Stop() error                             { return nil }

// A watch that cannot be made, or that delivers nothing, is made again:
// a replica starting while NATS elects the documents' leader once exited
// on "reading the API tokens: watching api-tokens: context deadline
// exceeded" (the scale-out rolling restart).
func TestWatchOutlastsAnElection(t *testing.T) {
	f := &flakyWatches{values: [][]byte{[]byte(`"a"`), []byte(`"b"`)}}
	d := &Docs{kv: f, attempt: 50 * time.Millisecond}
	var mu sync.Mutex
	var got []string
	err := d.Watch(t.Context(), "api-tokens", func(raw []byte) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(raw))
	})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{`"a"`, `"b"`}, got); diff != "" || f.watches != 3 {
		t.Errorf("delivered after %d watches (-want +got):\n%s", f.watches, diff)
	}
}

// A watch that never delivers gives up after electionFor, saying why;
// one whose context ends says that.
func TestWatchGivesUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	d := &Docs{kv: silentWatches{}, attempt: 50 * time.Millisecond}
	err := d.Watch(ctx, "api-tokens", func([]byte) {})
	if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "watching api-tokens: context deadline exceeded" {
		t.Errorf("Watch = %v, want the context's end", err)
	}
}

type silentWatches struct{ jetstream.KeyValue }

func (silentWatches) Watch(context.Context, string, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	return stoppable{make(chan jetstream.KeyValueEntry)}, nil
}
