package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

// rolloutEvent is an event of typeIn in rollout r.
func rolloutEvent(t *testing.T, id, r string) cloudevents.Event {
	t.Helper()
	e := newEvent(t, id, typeIn)
	e.SetExtension(events.ExtRolloutID, r)
	return e
}

// gated is a function whose calls for the rollouts "slow..." wait for release;
// every call is reported on calls.
type gated struct {
	fn
	calls   chan string
	release chan struct{}
}

func newGated() *gated {
	g := &gated{calls: make(chan string, 100), release: make(chan struct{})}
	g.fn = fn{name: "gated", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		g.calls <- e.ID()
		if strings.HasPrefix(events.RolloutID(e), "slow") {
			select {
			case <-g.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return nil, nil
	}}
	return g
}

// One rollout whose function blocks (a frozen cluster, a long pipeline)
// used to hold every other rollout behind it: one goroutine handled every
// event in turn. Its own later events still wait, in order; the watermark
// stays below it, so a crash would replay it.
func TestOneKeyDoesNotHoldAnother(t *testing.T) {
	s := newStore(t)
	g := newGated()
	d, err := dispatch.New(s, []dispatch.Function{g}, dispatch.Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, rolloutEvent(t, "slow-1", "slow"), rolloutEvent(t, "slow-2", "slow"),
		rolloutEvent(t, "fast-1", "fast"), rolloutEvent(t, "fast-2", "fast"), rolloutEvent(t, "fast-3", "fast"))
	start(t, d)
	got := waitCalls(t, g.calls, 4)
	if diff := cmp.Diff([]string{"slow-1", "fast-1", "fast-2", "fast-3"}, got, sortStrings); diff != "" {
		t.Errorf("handled while slow-1 blocks (-want +got):\n%s", diff)
	}
	var fast []string
	for _, id := range got {
		if strings.HasPrefix(id, "fast") {
			fast = append(fast, id)
		}
	}
	if diff := cmp.Diff([]string{"fast-1", "fast-2", "fast-3"}, fast); diff != "" {
		t.Errorf("fast rollout out of order (-want +got):\n%s", diff)
	}
	select {
	case id := <-g.calls:
		t.Fatalf("%s handled while slow-1 was still being handled", id)
	case <-time.After(50 * time.Millisecond):
	}
	if c, err := s.Cursor(t.Context(), "runtime"); err != nil || c != 0 {
		t.Errorf("cursor = %d, %v while event 1 is in flight: want 0", c, err)
	}
	close(g.release)
	if diff := cmp.Diff([]string{"slow-2"}, waitCalls(t, g.calls, 1)); diff != "" {
		t.Errorf("after release (-want +got):\n%s", diff)
	}
}

// A retry waits off the workers: other keys are handled during the
// backoff, the failing key's later events after it.
func TestRetryDoesNotHoldOtherKeys(t *testing.T) {
	s := newStore(t)
	calls := make(chan string, 100)
	failures := 2
	f := &fn{name: "flaky", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		calls <- e.ID()
		if e.ID() == "flaky-1" && failures > 0 {
			failures--
			return nil, errors.New("cluster unreachable")
		}
		return nil, nil
	}}
	d, err := dispatch.New(s, []dispatch.Function{f}, dispatch.Options{Workers: 1, Backoff: 200 * time.Millisecond, Attempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, rolloutEvent(t, "flaky-1", "flaky"), rolloutEvent(t, "flaky-2", "flaky"), rolloutEvent(t, "other-1", "other"))
	start(t, d)
	// One worker: other-1 can only run while flaky-1 waits for its retry.
	want := []string{"flaky-1", "other-1", "flaky-1", "flaky-1", "flaky-2"}
	if diff := cmp.Diff(want, waitCalls(t, calls, len(want))); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// Every call has a deadline: one that does not return in time is retried,
// then recorded as failed, and nothing else waits for it.
func TestCallDeadline(t *testing.T) {
	s := newStore(t)
	g := newGated()
	d, err := dispatch.New(s, []dispatch.Function{g}, dispatch.Options{CallTimeout: 20 * time.Millisecond, Attempts: 2, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, rolloutEvent(t, "slow-1", "slow"), rolloutEvent(t, "slow-2", "slow"))
	start(t, d)
	failedID := "slow-1/" + events.TypeFunctionFailed + "/gated"
	recs := waitJournal(t, s, failedID)
	p, err := events.Decode[events.FunctionFailed](recs[2].Event)
	if err != nil || !strings.Contains(p.Error, "did not finish within 20ms") {
		t.Errorf("function.failed = %+v, %v: want the deadline named", p, err)
	}
	if diff := cmp.Diff([]string{"slow-1", "slow-1", "slow-2"}, waitCalls(t, g.calls, 3)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// Stopped (or killed) while a key is in flight, the dispatcher saves a
// watermark below it: the next run handles it again, and what follows it
// in order. Nothing is skipped.
func TestRestartReplaysWhatWasInFlight(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s := openStore(t, path)
	g := newGated()
	d, err := dispatch.New(s, []dispatch.Function{g}, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, rolloutEvent(t, "fast-1", "fast"), rolloutEvent(t, "slow-1", "slow"),
		rolloutEvent(t, "slow-2", "slow"), rolloutEvent(t, "fast-2", "fast"))
	stop := start(t, d)
	waitCalls(t, g.calls, 3) // fast-1, slow-1 (blocked), fast-2
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Cursor(t.Context(), "runtime"); err != nil || c != 1 {
		t.Errorf("cursor = %d, %v: want 1 (fast-1 handled, slow-1 in flight)", c, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	g = newGated()
	close(g.release)
	if d, err = dispatch.New(s, []dispatch.Function{g}, dispatch.Options{}); err != nil {
		t.Fatal(err)
	}
	start(t, d)
	got := waitCalls(t, g.calls, 3)
	if diff := cmp.Diff([]string{"fast-2", "slow-1", "slow-2"}, got, sortStrings); diff != "" {
		t.Errorf("second run handled (-want +got):\n%s", diff)
	}
	if i, j := indexOf(got, "slow-1"), indexOf(got, "slow-2"); i > j {
		t.Errorf("slow-2 handled before slow-1: %v", got)
	}
}

// The events read and not yet handled are bounded: behind a blocked key the
// reader stops reading.
func TestInFlightBounded(t *testing.T) {
	s := newStore(t)
	g := newGated()
	reg := prometheus.NewRegistry()
	d, err := dispatch.New(s, []dispatch.Function{g}, dispatch.Options{MaxInFlight: 3, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		appendEvents(t, s, rolloutEvent(t, fmt.Sprintf("slow-%d", i), "slow"))
	}
	start(t, d)
	waitCalls(t, g.calls, 1)
	time.Sleep(50 * time.Millisecond) // give the reader the chance to overrun
	if n := gaugeValue(t, reg, "flotilla_dispatch_events_in_flight"); n != 3 {
		t.Errorf("in flight = %v, want 3", n)
	}
	close(g.release)
	waitCalls(t, g.calls, 19)
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
