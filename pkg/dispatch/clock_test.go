package dispatch_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// A bake of two hours (a timer a function schedules at its now + 2h) ends
// when the injected clock says so: not a moment earlier in wall time, and
// at once when the clock jumps. Catches a dispatcher that splits or fires
// timers on the wall clock (time.Now), which made the bake either never
// end under a virtual clock or end at once.
func TestTimersFollowTheInjectedClock(t *testing.T) {
	clock := dispatch.NewManualClock(time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC))
	s, err := store.Open(filepath.Join(t.TempDir(), "db"), store.WithClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const typeBaked = "dev.flotilla.test.baked.v1"
	const bake = 2 * time.Hour
	begin := clock.Now()
	baker := &fn{name: "baker", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		out, err := events.Derive(e, typeBaked, "", map[string]string{"from": e.ID()})
		return []cloudevents.Event{events.At(out, clock.Now().Add(bake))}, err
	}}
	baked := make(chan time.Time, 1)
	handler := &fn{name: "advance", consumes: []string{typeBaked}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
		baked <- clock.Now()
		return nil, nil
	}}
	d, err := dispatch.New(s, []dispatch.Function{baker, handler}, dispatch.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "in", typeIn))
	start(t, d)
	waitFor(t, func() bool { return d.Handled() >= 1 })
	clock.Advance(bake - time.Minute)
	select {
	case at := <-baked:
		t.Fatalf("the bake ended at %s, %s before its end", at, begin.Add(bake).Sub(at))
	case <-time.After(300 * time.Millisecond):
	}
	clock.Advance(time.Minute)
	select {
	case at := <-baked:
		if got := at.Sub(begin); got != bake {
			t.Errorf("the bake ended after %s of the clock, want %s", got, bake)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the bake never ended after the clock passed its end")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
