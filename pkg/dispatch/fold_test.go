package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

// choosy is a Selective function that wants no event.
type choosy struct{ *fn }

func (choosy) Wants(cloudevents.Event) bool { return false }

// folder is a test Folder: it folds events of typeIn, stops at any other,
// and records its calls as "one:id" and "fold:id,id,...".
type folder struct {
	fn
	// fold handles a folded call's events; nil derives one typeOut from
	// each and folds them all.
	fold func(es []cloudevents.Event) ([][]cloudevents.Event, error)
	// The first call says it began on entered, then waits for gate to
	// close.
	entered, gate chan struct{}
	once          sync.Once

	mu    sync.Mutex
	calls []string
}

func (f *folder) hold() {
	f.once.Do(func() {
		close(f.entered)
		<-f.gate
	})
}

func (f *folder) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *folder) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *folder) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	f.hold()
	f.record("one:" + e.ID())
	return emit(typeOut)(ctx, e)
}

func (f *folder) HandleFolded(ctx context.Context, es []cloudevents.Event) ([][]cloudevents.Event, error) {
	f.hold()
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID()
	}
	f.record("fold:" + strings.Join(ids, ","))
	if f.fold != nil {
		return f.fold(es)
	}
	return deriveEach(ctx, es)
}

// deriveEach derives one typeOut from each event of typeIn up to the
// first of another type.
func deriveEach(ctx context.Context, es []cloudevents.Event) ([][]cloudevents.Event, error) {
	var out [][]cloudevents.Event
	for _, e := range es {
		if e.Type() != typeIn {
			break
		}
		o, err := emit(typeOut)(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// rolloutEvents are events of rollout r: one key.
func rolloutEvents(t *testing.T, typ string, ids ...string) []cloudevents.Event {
	t.Helper()
	out := make([]cloudevents.Event, len(ids))
	for i, id := range ids {
		out[i] = newEvent(t, id, typ)
		out[i].SetExtension(events.ExtRolloutID, "r")
	}
	return out
}

// The events queued behind a key while its head is handled go to a
// Folder in one call, in order; what it derives from each is journaled in
// their order; an event it does not fold, and every event after a failed
// fold, is handed to Handle.
func TestFolderTakesTheQueuedEventsOfAKey(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		// queued are the events appended while the first (e0) is held.
		queued []cloudevents.Event
		fold   func(es []cloudevents.Event) ([][]cloudevents.Event, error)
		other  bool // another function consumes typeIn too: never folded
		// uninterested: the other function is Selective and wants none of
		// them: they are folded, and it is handed none.
		uninterested bool
		want         []string
	}{{
		name:   "a burst in one call",
		queued: rolloutEvents(t, typeIn, "e1", "e2", "e3", "e4"),
		want:   []string{"one:e0", "fold:e1,e2,e3,e4"},
	}, {
		name:   "stops at an event it does not fold",
		queued: append(append(rolloutEvents(t, typeIn, "e1", "e2"), rolloutEvents(t, typeMid, "m3")...), rolloutEvents(t, typeIn, "e4", "e5")...),
		want:   []string{"one:e0", "fold:e1,e2,m3,e4,e5", "fold:m3,e4,e5", "one:m3", "fold:e4,e5"},
	}, {
		name:   "a failed fold handles each alone",
		queued: rolloutEvents(t, typeIn, "e1", "e2", "e3"),
		fold:   func([]cloudevents.Event) ([][]cloudevents.Event, error) { return nil, boom },
		want:   []string{"one:e0", "fold:e1,e2,e3", "one:e1", "fold:e2,e3", "one:e2", "one:e3"},
	}, {
		name:   "shared with another function",
		queued: rolloutEvents(t, typeIn, "e1", "e2"),
		other:  true,
		want:   []string{"one:e0", "one:e1", "one:e2"},
	}, {
		name:         "shared with a function that does not want them",
		queued:       rolloutEvents(t, typeIn, "e1", "e2"),
		other:        true,
		uninterested: true,
		want:         []string{"one:e0", "fold:e1,e2"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			reg := prometheus.NewRegistry()
			f := &folder{fn: fn{name: "folder", consumes: []string{typeIn, typeMid}}, fold: tc.fold, entered: make(chan struct{}), gate: make(chan struct{})}
			fns := []dispatch.Function{f}
			other := &fn{name: "other", consumes: []string{typeIn}}
			switch {
			case tc.uninterested:
				fns = append(fns, choosy{other})
			case tc.other:
				fns = append(fns, other)
			}
			d, err := dispatch.New(s, fns, dispatch.Options{Metrics: reg})
			if err != nil {
				t.Fatal(err)
			}
			appendEvents(t, s, rolloutEvents(t, typeIn, "e0")...)
			start(t, d)
			select {
			case <-f.entered:
			case <-time.After(waitTimeout):
				t.Fatal("e0 was not handled")
			}
			appendEvents(t, s, tc.queued...)
			// Every event read and queued behind e0 before it is let go.
			if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
				return gaugeValue(t, reg, "flotilla_dispatch_events_in_flight") == float64(1+len(tc.queued)), nil
			}); err != nil {
				t.Fatalf("waiting for the events to queue: %v", err)
			}
			close(f.gate)
			var want []string
			for _, e := range append(rolloutEvents(t, typeIn, "e0"), tc.queued...) {
				want = append(want, e.ID()+"/"+typeOut)
			}
			recs := waitJournal(t, s, want...)
			if diff := cmp.Diff(tc.want, f.log()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if got := other.calls(); tc.uninterested && len(got) > 0 {
				t.Errorf("the function that wants none of them was handed %v", got)
			}
			var got []string
			for _, r := range recs {
				if r.Event.Type() == typeOut {
					got = append(got, r.Event.ID())
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("derived events in the journal (-want +got):\n%s", diff)
			}
			if err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
				return gaugeValue(t, reg, "flotilla_dispatch_events_in_flight") == 0, nil
			}); err != nil {
				t.Errorf("events still in flight after all were handled: %v", err)
			}
		})
	}
}
