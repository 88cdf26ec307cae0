package dispatch_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

var idleStart = time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)

// virtualStore is a store whose timers follow clock.
func virtualStore(t *testing.T, clock *dispatch.ManualClock) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "db"), store.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// idle is what WaitIdle saw: the calls made by then and what is due next.
type idle struct {
	Calls []string
	Next  time.Duration // after idleStart
	OK    bool
}

// WaitIdle returns once every event is handled, whatever the calls take,
// in every lane, and what their output led to: a chain of a slow call, a
// slow laned call (a pipeline run) and a last call that schedules a timer
// an hour on. Catches an idleness guessed from quiet (a handler kept from
// a CPU looks idle) and one that counts the default lane and not the
// others.
func TestWaitIdleWaitsForEveryLane(t *testing.T) {
	tests := []struct {
		name           string
		first, laneRun time.Duration // how long the calls take (wall)
	}{
		{"instant calls", 0, 0},
		{"a slow call", 50 * time.Millisecond, 0},
		{"a slow laned call", 0, 50 * time.Millisecond},
		{"both slow", 30 * time.Millisecond, 30 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := dispatch.NewManualClock(idleStart)
			s := virtualStore(t, clock)
			var mu sync.Mutex
			var calls []string
			call := func(name string, took time.Duration, out func(cloudevents.Event) (cloudevents.Event, error)) func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
				return func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
					time.Sleep(took)
					mu.Lock()
					calls = append(calls, name)
					mu.Unlock()
					o, err := out(e)
					return []cloudevents.Event{o}, err
				}
			}
			derive := func(typ string) func(cloudevents.Event) (cloudevents.Event, error) {
				return func(e cloudevents.Event) (cloudevents.Event, error) {
					return events.Derive(e, typ, "", map[string]string{"from": e.ID()})
				}
			}
			first := &fn{name: "first", consumes: []string{typeIn}, handle: call("first", tc.first, derive(typeRun))}
			runs := laned{
				fn:   &fn{name: "runner", consumes: []string{typeRun}, handle: call("runner", tc.laneRun, derive(typeMid))},
				lane: dispatch.Lane{Name: "runs", Workers: 2, CallTimeout: time.Minute, Attempts: 3, MaxBackoff: time.Second},
			}
			last := &fn{name: "last", consumes: []string{typeMid}, handle: call("last", 0, func(e cloudevents.Event) (cloudevents.Event, error) {
				o, err := events.Derive(e, typeOut, "", map[string]string{"from": e.ID()})
				return events.At(o, clock.Now().Add(time.Hour)), err
			})}
			d, err := dispatch.New(s, []dispatch.Function{first, runs, last}, dispatch.Options{Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			start(t, d)
			appendEvents(t, s, newEvent(t, "in", typeIn))
			next, ok, err := d.WaitIdle(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := idle{Calls: append([]string(nil), calls...), Next: next.Sub(idleStart), OK: ok}
			mu.Unlock()
			want := idle{Calls: []string{"first", "runner", "last"}, Next: time.Hour, OK: true}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("idle (-want +got):\n%s", diff)
			}
		})
	}
}

// A failed call is tried again after its backoff on the dispatcher's
// clock: a virtual clock's retries land on virtual instants (1s, 2s, 4s,
// then the lane's cap of 5s), and a retry waiting is no work in flight
// but the next thing due. Catches backoffs on the wall clock (a simulated
// unreachable cluster cost seconds of wall time per event, and its retries
// no virtual time).
func TestRetriesFollowTheInjectedClock(t *testing.T) {
	tests := []struct {
		name     string
		failures int
		want     []time.Duration // the calls, after the first
	}{
		{"no failure", 0, []time.Duration{0}},
		{"one failure", 1, []time.Duration{0, time.Second}},
		{"backoff doubles up to the lane's cap", 4, []time.Duration{0, 1 * time.Second, 3 * time.Second, 7 * time.Second, 12 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := dispatch.NewManualClock(idleStart)
			s := virtualStore(t, clock)
			var mu sync.Mutex
			var at []time.Duration
			failures := tc.failures
			flaky := &fn{name: "flaky", consumes: []string{typeIn}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
				mu.Lock()
				defer mu.Unlock()
				at = append(at, clock.Now().Sub(idleStart))
				if failures > 0 {
					failures--
					return nil, errors.New("try again")
				}
				return nil, nil
			}}
			d, err := dispatch.New(s, []dispatch.Function{flaky}, dispatch.Options{Clock: clock, Attempts: 10, Backoff: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start(t, d)
			appendEvents(t, s, newEvent(t, "in", typeIn))
			wall := time.Now()
			for range 20 {
				next, ok, err := d.WaitIdle(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				clock.Set(next)
			}
			if took := time.Since(wall); took > 5*time.Second {
				t.Errorf("the retries took %s of wall time", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tc.want, at); diff != "" {
				t.Errorf("calls at (-want +got):\n%s", diff)
			}
		})
	}
}

// A timer that falls due as the clock is set is handled before WaitIdle
// returns, and a wait for an instant set before the clock jumped still
// ends at that instant. Catches a timers loop that waits a duration
// computed before the clock moved (it woke that much after the new time,
// and the simulation saw the timer due and never fired).
func TestWaitIdleFiresTheTimerTheClockReached(t *testing.T) {
	clock := dispatch.NewManualClock(idleStart)
	s := virtualStore(t, clock)
	handled := make(chan time.Duration, 4)
	baker := &fn{name: "baker", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		var out []cloudevents.Event
		for _, after := range []time.Duration{2 * time.Hour, 30 * time.Minute} {
			o, err := events.Derive(e, typeMid, after.String(), map[string]string{"after": after.String()})
			if err != nil {
				return nil, err
			}
			out = append(out, events.At(o, clock.Now().Add(after)))
		}
		return out, nil
	}}
	advance := &fn{name: "advance", consumes: []string{typeMid}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
		handled <- clock.Now().Sub(idleStart)
		return nil, nil
	}}
	d, err := dispatch.New(s, []dispatch.Function{baker, advance}, dispatch.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	start(t, d)
	appendEvents(t, s, newEvent(t, "in", typeIn))
	var got []time.Duration
	for {
		next, ok, err := d.WaitIdle(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for len(handled) > 0 {
			got = append(got, <-handled)
		}
		if !ok || next.Sub(idleStart) > 2*time.Hour {
			break
		}
		clock.Set(next)
	}
	if diff := cmp.Diff([]time.Duration{30 * time.Minute, 2 * time.Hour}, got); diff != "" {
		t.Errorf("timers handled at (-want +got):\n%s", diff)
	}
}

// WaitIdle waits for Run, and gives up with its context.
func TestWaitIdleBeforeRun(t *testing.T) {
	d, err := dispatch.New(newStore(t), nil, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, _, err := d.WaitIdle(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitIdle before Run = %v, want the context's deadline", err)
	}
}
