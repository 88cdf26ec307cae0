package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

const typeTick = "dev.flotilla.test.tick.v1"

// named derives an event of typ named name from e, the name in its
// payload (what the test reads back from the journal).
func named(e cloudevents.Event, typ, name string) (cloudevents.Event, error) {
	return events.Derive(e, typ, name, map[string]string{"name": name})
}

// Sequential dispatch journals the same events in the same order every
// run: one event at a time in journal order across keys and lanes, and,
// when the clock makes a retry and a timer due at once, the retry (its
// event came first) before the timer. The calls take the longer the
// earlier they were asked for, so that in parallel the later ones end
// first. Catches a sequential mode that takes whatever is ready first (the
// runs' ends in the order their sleeps end, an order of the machine's) and
// one that handles a timer fired before a retry due at the same instant
// is back.
func TestSequentialFollowsTheJournal(t *testing.T) {
	want := []string{
		"in", "run-1", "mid-1", "run-2", "mid-2", "run-3", "mid-3", "run-4", "mid-4",
		"ran-1", "done-1", "ran-2", "ran-3", "done-3", "ran-4", "done-4",
		"tick", "done-2", "ticked",
	}
	for i := range 5 {
		t.Run(fmt.Sprint("run ", i+1), func(t *testing.T) {
			clock := dispatch.NewManualClock(idleStart)
			s := virtualStore(t, clock)
			fan := &fn{name: "fan", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
				var out []cloudevents.Event
				for n := 1; n <= 4; n++ {
					for _, x := range []struct{ typ, name string }{{typeRun, fmt.Sprint("run-", n)}, {typeMid, fmt.Sprint("mid-", n)}} {
						o, err := named(e, x.typ, x.name)
						if err != nil {
							return nil, err
						}
						out = append(out, o)
					}
				}
				tick, err := named(e, typeTick, "tick")
				return append(out, events.At(tick, clock.Now().Add(time.Second))), err
			}}
			nameOf := func(e cloudevents.Event) (int, error) {
				var p struct{ Name string }
				if err := json.Unmarshal(e.Data(), &p); err != nil {
					return 0, err
				}
				var n int
				_, err := fmt.Sscanf(p.Name[len(p.Name)-1:], "%d", &n)
				return n, err
			}
			runs := laned{
				fn: &fn{name: "runner", consumes: []string{typeRun}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
					n, err := nameOf(e)
					if err != nil {
						return nil, err
					}
					time.Sleep(time.Duration(5-n) * 3 * time.Millisecond)
					o, err := named(e, typeOut, fmt.Sprint("ran-", n))
					return []cloudevents.Event{o}, err
				}},
				lane: dispatch.Lane{Name: "runs", Workers: 4, CallTimeout: time.Minute, Attempts: 3, MaxBackoff: time.Second},
			}
			var mu sync.Mutex
			failed := false
			mid := &fn{name: "mid", consumes: []string{typeMid}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
				n, err := nameOf(e)
				if err != nil {
					return nil, err
				}
				time.Sleep(time.Duration(5-n) * 2 * time.Millisecond)
				mu.Lock()
				fail := n == 2 && !failed
				failed = failed || fail
				mu.Unlock()
				if fail {
					return nil, errors.New("try again")
				}
				o, err := named(e, typeOut, fmt.Sprint("done-", n))
				return []cloudevents.Event{o}, err
			}}
			ticked := &fn{name: "ticked", consumes: []string{typeTick}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
				o, err := named(e, typeOut, "ticked")
				return []cloudevents.Event{o}, err
			}}
			d, err := dispatch.New(s, []dispatch.Function{fan, runs, mid, ticked},
				dispatch.Options{Clock: clock, Backoff: time.Second, Sequential: true})
			if err != nil {
				t.Fatal(err)
			}
			start(t, d)
			appendEvents(t, s, newEvent(t, "in", typeIn))
			for range 10 {
				next, ok, err := d.WaitIdle(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				clock.Set(next)
			}
			recs, err := s.Read(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				var p struct {
					ID, Name string
				}
				if err := json.Unmarshal(r.Event.Data(), &p); err != nil {
					t.Fatal(err)
				}
				got = append(got, p.ID+p.Name)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the journal (-want +got):\n%s", diff)
			}
		})
	}
}

// Sequential dispatch folds a Folder's burst as the parallel workers do,
// and journals what one at a time would: a rollout's events journaled
// whole while the dispatcher is held (Hold, as `flotilla simulate`'s
// Flagger journals a wave's verdicts) go to the Folder in one call up to
// the first event of another key, which is handled before the rest of the
// burst; the derived events come out in the inputs' order. Each input is
// appended on its own, so an unheld worker would start on the first. Catches a
// sequential mode that does not fold (five calls instead of two: the
// 1,000-cluster simulation rewrote its rollout for every cluster's
// verdict), one whose fold takes e4 and e5 before m3 (the outputs'
// order), and one whose fold depends on how far the reader had read.
func TestSequentialFoldsInJournalOrder(t *testing.T) {
	for i := range 5 {
		t.Run(fmt.Sprint("run ", i+1), func(t *testing.T) {
			clock := dispatch.NewManualClock(idleStart)
			s := virtualStore(t, clock)
			gate := make(chan struct{})
			close(gate)
			f := &folder{fn: fn{name: "folder", consumes: []string{typeIn}}, entered: make(chan struct{}), gate: gate}
			mid := &fn{name: "mid", consumes: []string{typeMid}, handle: emit(typeOut)}
			d, err := dispatch.New(s, []dispatch.Function{f, mid}, dispatch.Options{Clock: clock, Sequential: true})
			if err != nil {
				t.Fatal(err)
			}
			start(t, d)
			if _, _, err := d.WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}
			other := newEvent(t, "m3", typeMid)
			other.SetExtension(events.ExtRolloutID, "s")
			burst := rolloutEvents(t, typeIn, "e1", "e2")
			burst = append(burst, other)
			burst = append(burst, rolloutEvents(t, typeIn, "e4", "e5")...)
			d.Hold()
			for _, e := range burst {
				appendEvents(t, s, e)
			}
			time.Sleep(20 * time.Millisecond) // an unheld worker would have started
			d.Release()
			if _, _, err := d.WaitIdle(t.Context()); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"fold:e1,e2", "fold:e4,e5"}, f.log()); diff != "" {
				t.Errorf("the folder's calls (-want +got):\n%s", diff)
			}
			recs, err := s.Read(t.Context(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range recs {
				var p struct{ From string }
				if r.Event.Type() != typeOut {
					continue
				}
				if err := json.Unmarshal(r.Event.Data(), &p); err != nil {
					t.Fatal(err)
				}
				got = append(got, p.From)
			}
			if diff := cmp.Diff([]string{"e1", "e2", "m3", "e4", "e5"}, got); diff != "" {
				t.Errorf("the derived events, by input (-want +got):\n%s", diff)
			}
		})
	}
}
