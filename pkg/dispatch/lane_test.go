package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

const typeRun = "dev.flotilla.test.run.v1"

// laned is a function in a lane of its own.
type laned struct {
	*fn
	lane dispatch.Lane
}

func (l laned) Lane() dispatch.Lane { return l.lane }

// Runs in a lane wait as long as they need without taking the workers of
// other functions, even runs of the same rollout: with one default worker,
// two runs that block do not keep the rollout's next event from its
// function.
func TestLaneKeepsLongCallsOffTheWorkers(t *testing.T) {
	s := newStore(t)
	release := make(chan struct{})
	running := make(chan string, 10)
	runs := laned{
		fn: &fn{name: "runner", consumes: []string{typeRun}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
			running <- e.ID()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, nil
		}},
		lane: dispatch.Lane{Name: "runs", Workers: 4, CallTimeout: time.Minute, Attempts: 3, MaxBackoff: time.Second},
	}
	other := &fn{name: "other", consumes: []string{typeIn}, handle: emit(typeOut)}
	d, err := dispatch.New(s, []dispatch.Function{runs, other}, dispatch.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	run1, run2 := newEvent(t, "run-1", typeRun), newEvent(t, "run-2", typeRun)
	for _, e := range []*cloudevents.Event{&run1, &run2} {
		e.SetExtension(events.ExtRolloutID, "shop-1")
	}
	appendEvents(t, s, run1, run2, rolloutEvent(t, "next", "shop-1"))
	start(t, d)
	got := waitCalls(t, running, 2)
	if diff := cmp.Diff([]string{"run-1", "run-2"}, got, sortStrings); diff != "" {
		t.Errorf("runs started (-want +got):\n%s", diff)
	}
	waitJournal(t, s, "next/"+typeOut)
	close(release)
}

func TestLaneMisconfigured(t *testing.T) {
	s := newStore(t)
	bad := laned{fn: &fn{name: "runner", consumes: []string{typeRun}}, lane: dispatch.Lane{Name: "runs"}}
	if _, err := dispatch.New(s, []dispatch.Function{bad}, dispatch.Options{}); err == nil {
		t.Error("a lane without workers was accepted")
	}
	good := laned{fn: &fn{name: "runner", consumes: []string{typeIn}}, lane: dispatch.Lane{Name: "runs", Workers: 1, CallTimeout: time.Second, Attempts: 1, MaxBackoff: time.Second}}
	plain := &fn{name: "plain", consumes: []string{typeIn}}
	if _, err := dispatch.New(s, []dispatch.Function{good, plain}, dispatch.Options{}); err == nil {
		t.Error("two consumers of one type in different lanes were accepted")
	}
	if err := dispatch.CheckLanes([]dispatch.Function{good, plain}); err == nil || !strings.Contains(err.Error(), "different lanes") {
		t.Errorf("CheckLanes(two lanes for one type) = %v, want the lanes named", err)
	}
	if err := dispatch.CheckLanes([]dispatch.Function{bad}); err == nil {
		t.Error("CheckLanes accepted a lane without workers")
	}
	if err := dispatch.CheckLanes([]dispatch.Function{good, laned{fn: &fn{name: "other", consumes: []string{typeIn, typeRun}}, lane: good.lane}}); err != nil {
		t.Errorf("CheckLanes(one lane) = %v", err)
	}
}

// A function's event due later is a timer: journaled when it falls due,
// not before, and handled then.
func TestTimersFireWhenDue(t *testing.T) {
	s := newStore(t)
	const typeDeadline = "dev.flotilla.test.deadline.v1"
	due := time.Now().Add(300 * time.Millisecond)
	scheduler := &fn{name: "scheduler", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		out, err := events.Derive(e, typeDeadline, "", map[string]string{"from": e.ID()})
		return []cloudevents.Event{events.At(out, due)}, err
	}}
	fired := make(chan time.Time, 1)
	handler := &fn{name: "deadline", consumes: []string{typeDeadline}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
		fired <- time.Now()
		return nil, nil
	}}
	d, err := dispatch.New(s, []dispatch.Function{scheduler, handler}, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "in", typeIn))
	start(t, d)
	select {
	case at := <-fired:
		if at.Before(due) {
			t.Errorf("the timer fired %s early", due.Sub(at))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer never fired")
	}
}
