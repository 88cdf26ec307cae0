package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// waitTimeout bounds every wait; tests wait on the journal, never sleep.
const waitTimeout = 20 * time.Second

const (
	typeIn  = "dev.flotilla.test.in.v1"
	typeMid = "dev.flotilla.test.mid.v1"
	typeOut = "dev.flotilla.test.out.v1"
)

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // a test may have closed it already
	return s
}

func newStore(t *testing.T) *store.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "db"))
}

// fn is a test function: it consumes some types and handles them with handle,
// remembering the ids it was given.
type fn struct {
	name     string
	consumes []string
	handle   func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error)

	mu   sync.Mutex
	seen []string
}

func (f *fn) Name() string       { return f.name }
func (f *fn) Consumes() []string { return f.consumes }
func (f *fn) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	f.mu.Lock()
	f.seen = append(f.seen, e.ID())
	f.mu.Unlock()
	if f.handle == nil {
		return nil, nil
	}
	return f.handle(ctx, e)
}

func (f *fn) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// emit returns a handler that derives one event of typ from its input.
func emit(typ string) func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
	return func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		out, err := events.Derive(e, typ, "", map[string]string{"from": e.ID()})
		return []cloudevents.Event{out}, err
	}
}

func newEvent(t *testing.T, id, typ string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, "/test", typ, map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func appendEvents(t *testing.T, s *store.Store, evs ...cloudevents.Event) {
	t.Helper()
	if _, err := s.Append(t.Context(), evs...); err != nil {
		t.Fatalf("appending: %v", err)
	}
}

// start runs rt until the test ends or the returned stop is called; stop
// returns Run's error.
func start(t *testing.T, rt interface{ Run(context.Context) error }) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(waitTimeout):
				err = errors.New("Run did not return after cancel")
			}
		})
		return err
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return stop
}

// waitJournal waits until the journal holds every id.
func waitJournal(t *testing.T, s *store.Store, ids ...string) []store.Record {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		ch := s.Changed()
		recs, err := s.Read(t.Context(), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, r := range recs {
			have[r.Event.ID()] = true
		}
		missing := 0
		for _, id := range ids {
			if !have[id] {
				missing++
			}
		}
		if missing == 0 {
			return recs
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("waiting for %v in the journal; have %v", ids, idsOf(recs))
		}
	}
}

func idsOf(recs []store.Record) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Event.ID())
	}
	return ids
}

// waitCalls waits until f has seen n events; calls tell the test over a
// channel, so no polling.
func waitCalls(t *testing.T, ch <-chan string, n int) []string {
	t.Helper()
	deadline := time.After(waitTimeout)
	var got []string
	for len(got) < n {
		select {
		case id := <-ch:
			got = append(got, id)
		case <-deadline:
			t.Fatalf("waited for %d calls, got %v", n, got)
		}
	}
	return got
}

func TestRuntimeRoutesByType(t *testing.T) {
	s := newStore(t)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeMid)}
	b := &fn{name: "b", consumes: []string{typeMid}, handle: emit(typeOut)}
	both := &fn{name: "both", consumes: []string{typeIn, typeMid}}
	// Functions of one type are called in the order given, so once b's
	// last output is journaled, both has seen everything.
	rt, err := dispatch.New(s, []dispatch.Function{a, both, b}, dispatch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One rollout: one key, so its events are handled in journal order.
	e1, e2 := newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn)
	e1.SetExtension(events.ExtRolloutID, "r")
	e2.SetExtension(events.ExtRolloutID, "r")
	appendEvents(t, s, e1, newEvent(t, "x", "dev.flotilla.test.nobody.v1"), e2)
	start(t, rt)

	mid1, mid2 := "e1/"+typeMid, "e2/"+typeMid
	recs := waitJournal(t, s, mid1+"/"+typeOut, mid2+"/"+typeOut)
	if diff := cmp.Diff([]string{"e1", "e2"}, a.calls()); diff != "" {
		t.Errorf("a saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{mid1, mid2}, b.calls()); diff != "" {
		t.Errorf("b saw (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"e1", "e2", mid1, mid2}, both.calls()); diff != "" {
		t.Errorf("both saw (-want +got):\n%s", diff)
	}
	want := []string{"e1", "x", "e2", mid1, mid2, mid1 + "/" + typeOut, mid2 + "/" + typeOut}
	if diff := cmp.Diff(want, idsOf(recs)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
}

// TestRuntimeRedelivery handles the journal twice, as after a crash before
// the cursor was saved: the functions see the events again, and what they
// emit again is dropped by id.
func TestRuntimeRedelivery(t *testing.T) {
	s := newStore(t)
	var observed []string
	var mu sync.Mutex
	observe := func(r store.Record) {
		mu.Lock()
		defer mu.Unlock()
		observed = append(observed, r.Event.ID())
	}
	newRuntime := func(f *fn) *dispatch.Dispatcher {
		rt, err := dispatch.New(s, []dispatch.Function{f}, dispatch.Options{Observe: observe})
		if err != nil {
			t.Fatal(err)
		}
		return rt
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	first := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeOut)}
	stop := start(t, newRuntime(first))
	waitJournal(t, s, "e1/"+typeOut)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	if err := s.SetCursor(t.Context(), "runtime", 0); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 10)
	second := &fn{name: "a", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		defer func() { seen <- e.ID() }()
		return emit(typeOut)(ctx, e)
	}}
	stop = start(t, newRuntime(second))
	waitCalls(t, seen, 1)
	// A sentinel behind the redelivered event shows the runtime is past it.
	appendEvents(t, s, newEvent(t, "e2", typeIn))
	waitJournal(t, s, "e2/"+typeOut)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e1", "e1/" + typeOut, "e2", "e2/" + typeOut}, idsOf(recs)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"e1/" + typeOut, "e2/" + typeOut}, observed); diff != "" {
		t.Errorf("Observe saw (-want +got):\n%s", diff)
	}
}

func TestRuntimeRetries(t *testing.T) {
	s := newStore(t)
	reg := prometheus.NewPedanticRegistry()
	var mu sync.Mutex
	failures := 2
	flaky := &fn{name: "flaky", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		mu.Lock()
		defer mu.Unlock()
		if failures > 0 {
			failures--
			return nil, errors.New("try again")
		}
		return emit(typeOut)(ctx, e)
	}}
	rt, err := dispatch.New(s, []dispatch.Function{flaky}, dispatch.Options{Metrics: reg, Attempts: 5, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	start(t, rt)
	recs := waitJournal(t, s, "e1/"+typeOut)

	if diff := cmp.Diff([]string{"e1", "e1", "e1"}, flaky.calls()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"e1", "e1/" + typeOut}, idsOf(recs)); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	const want = `
# HELP flotilla_function_calls_total Function invocations by function and outcome (ok, retryable, permanent).
# TYPE flotilla_function_calls_total counter
flotilla_function_calls_total{function="flaky",outcome="ok"} 1
flotilla_function_calls_total{function="flaky",outcome="retryable"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flotilla_function_calls_total"); err != nil {
		t.Error(err)
	}
}

// TestRuntimeGivesUp checks that a function that gives up on an event leaves
// a function.failed event in the journal and does not stop the runtime.
func TestRuntimeGivesUp(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantCalls int
		permanent bool
	}{
		{"permanent error: no retry", fault.Permanent(errors.New("bad input")), 1, true},
		{"retries exhausted", errors.New("still down"), 3, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStore(t)
			reg := prometheus.NewPedanticRegistry()
			failing := &fn{name: "failing", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
				if e.ID() == "bad" {
					return nil, tt.err
				}
				return emit(typeOut)(ctx, e)
			}}
			rt, err := dispatch.New(s, []dispatch.Function{failing}, dispatch.Options{Metrics: reg, Attempts: 3, Backoff: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			bad := newEvent(t, "bad", typeIn)
			bad.SetExtension(events.ExtRolloutID, "shop-1")
			appendEvents(t, s, bad, newEvent(t, "good", typeIn))
			start(t, rt)
			failedID := "bad/" + events.TypeFunctionFailed + "/failing"
			recs := waitJournal(t, s, failedID, "good/"+typeOut)

			// Different keys: good is not held behind bad's retries.
			if diff := cmp.Diff([]string{"bad", "good", failedID, "good/" + typeOut}, idsOf(recs), sortStrings); diff != "" {
				t.Errorf("journal (-want +got):\n%s", diff)
			}
			var failed cloudevents.Event
			for _, r := range recs {
				if r.Event.ID() == failedID {
					failed = r.Event
				}
			}
			if failed.Type() != events.TypeFunctionFailed || events.RolloutID(failed) != "shop-1" {
				t.Errorf("function.failed event: type %s, rollout %q", failed.Type(), events.RolloutID(failed))
			}
			got, err := events.Decode[events.FunctionFailed](failed)
			if err != nil {
				t.Fatal(err)
			}
			wantPayload := events.FunctionFailed{Function: "failing", EventID: "bad", EventType: typeIn, Error: tt.err.Error(), Permanent: tt.permanent}
			if diff := cmp.Diff(wantPayload, got, cmpopts.IgnoreFields(events.FunctionFailed{}, "Event")); diff != "" {
				t.Errorf("function.failed payload (-want +got):\n%s", diff)
			}
			// It carries the event given up on, for a retry to replay.
			replay, err := events.FailedEvent(got)
			if err != nil {
				t.Fatal(err)
			}
			if replay.ID() != "bad" || replay.Type() != typeIn || events.RolloutID(replay) != "shop-1" || string(replay.Data()) != string(bad.Data()) {
				t.Errorf("the failed event reads back as %v", replay)
			}
			calls := 0
			for _, id := range failing.calls() {
				if id == "bad" {
					calls++
				}
			}
			if calls != tt.wantCalls {
				t.Errorf("bad event handled %d times, want %d", calls, tt.wantCalls)
			}
			outcome := "retryable"
			if tt.permanent {
				outcome = "permanent"
			}
			want := fmt.Sprintf(`
# HELP flotilla_function_calls_total Function invocations by function and outcome (ok, retryable, permanent).
# TYPE flotilla_function_calls_total counter
flotilla_function_calls_total{function="failing",outcome="ok"} 1
flotilla_function_calls_total{function="failing",outcome=%q} %d
`, outcome, tt.wantCalls)
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flotilla_function_calls_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestRuntimeMetrics(t *testing.T) {
	s := newStore(t)
	reg := prometheus.NewPedanticRegistry()
	a := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeOut)}
	b := &fn{name: "b", consumes: []string{typeIn}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
		return nil, fault.Permanent(errors.New("no"))
	}}
	rt, err := dispatch.New(s, []dispatch.Function{a, b}, dispatch.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn))
	start(t, rt)
	// e1 and e2 are keys of their own, handled in parallel: wait for both.
	waitJournal(t, s, "e1/"+typeOut, "e1/"+events.TypeFunctionFailed+"/b", "e2/"+typeOut, "e2/"+events.TypeFunctionFailed+"/b")

	const want = `
# HELP flotilla_function_calls_total Function invocations by function and outcome (ok, retryable, permanent).
# TYPE flotilla_function_calls_total counter
flotilla_function_calls_total{function="a",outcome="ok"} 2
flotilla_function_calls_total{function="b",outcome="permanent"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "flotilla_function_calls_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "flotilla_function_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			counts[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	if diff := cmp.Diff(map[string]uint64{"a": 2, "b": 2}, counts); diff != "" {
		t.Errorf("duration samples per function (-want +got):\n%s", diff)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	// The dispatchers of a replica's partitions (Shards) share one
	// registry: a second one counts on the collectors of the first.
	if _, err := dispatch.New(s, nil, dispatch.Options{Metrics: reg}); err != nil {
		t.Errorf("a second dispatcher on the registry: %v", err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint after a second dispatcher: %v %v", problems, err)
	}
}

// TestRuntimeResumesFromCursor stops a runtime, reopens the store and runs a
// new one: it carries on after the events already handled. Delivery is at
// least once: an event being handled when the runtime stopped may be handled
// again, never one before it.
func TestRuntimeResumesFromCursor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	s := openStore(t, path)
	seen := make(chan string, 100)
	counting := func() *fn {
		return &fn{name: "a", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
			seen <- e.ID()
			return nil, nil
		}}
	}
	rt, err := dispatch.New(s, []dispatch.Function{counting()}, dispatch.Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn), newEvent(t, "e3", typeIn))
	stop := start(t, rt)
	if diff := cmp.Diff([]string{"e1", "e2", "e3"}, waitCalls(t, seen, 3), sortStrings); diff != "" {
		t.Errorf("first run handled (-want +got):\n%s", diff)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	cursor, err := s.Cursor(t.Context(), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	if cursor < 2 {
		t.Errorf("cursor after handling 3 events = %d, want at least 2", cursor)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path)
	rt, err = dispatch.New(s, []dispatch.Function{counting()}, dispatch.Options{Batch: 1})
	if err != nil {
		t.Fatal(err)
	}
	start(t, rt)
	appendEvents(t, s, newEvent(t, "e4", typeIn))
	want := []string{"e4"}
	if cursor < 3 {
		want = []string{"e3", "e4"} // e3 was being handled when the runtime stopped
	}
	if diff := cmp.Diff(want, waitCalls(t, seen, len(want))); diff != "" {
		t.Errorf("second run handled (-want +got):\n%s", diff)
	}
}

// TestRuntimeStopsCleanly cancels the runtime while a function is handling
// an event: Run returns nil, and the events before it are not handled again.
func TestRuntimeStopsCleanly(t *testing.T) {
	s := newStore(t)
	entered := make(chan string, 10)
	blocking := &fn{name: "blocking", consumes: []string{typeIn}, handle: func(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		entered <- e.ID()
		if e.ID() == "e1" {
			return nil, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}}
	rt, err := dispatch.New(s, []dispatch.Function{blocking}, dispatch.Options{Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn))
	stop := start(t, rt)
	waitCalls(t, entered, 2)
	if err := stop(); err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	cursor, err := s.Cursor(t.Context(), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	if cursor != 1 {
		t.Errorf("cursor = %d, want 1 (e1 handled, e2 interrupted)", cursor)
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"e1", "e2"}, idsOf(recs)); diff != "" {
		t.Errorf("an interrupted call left events (-want +got):\n%s", diff)
	}
}

// TestRuntimeDoesNotWaitAfterLastAttempt gives up at once after the last
// attempt: with one attempt and a backoff far longer than the test, the
// failure is journaled without waiting for the backoff.
func TestRuntimeDoesNotWaitAfterLastAttempt(t *testing.T) {
	s := newStore(t)
	failing := &fn{name: "failing", consumes: []string{typeIn}, handle: func(context.Context, cloudevents.Event) ([]cloudevents.Event, error) {
		return nil, errors.New("down")
	}}
	rt, err := dispatch.New(s, []dispatch.Function{failing}, dispatch.Options{Attempts: 1, Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	start(t, rt)
	waitJournal(t, s, "e1/"+events.TypeFunctionFailed+"/failing")
}

// journalFailing is the store with appends or cursor saves that fail while
// its switch is on: a disk that filled up, then was cleared.
type journalFailing struct {
	*store.Store
	appends, saves, reads atomic.Bool
	err                   error
}

func (j *journalFailing) Cursor(ctx context.Context, consumer string) (uint64, error) {
	if j.reads.Load() {
		return 0, j.err
	}
	return j.Store.Cursor(ctx, consumer)
}

func (j *journalFailing) Append(ctx context.Context, evs ...cloudevents.Event) ([]store.Record, error) {
	if j.appends.Load() {
		return nil, j.err
	}
	return j.Store.Append(ctx, evs...)
}

func (j *journalFailing) SetCursor(ctx context.Context, consumer string, seq uint64) error {
	if j.saves.Load() {
		return j.err
	}
	return j.Store.SetCursor(ctx, consumer, seq)
}

// waitErr waits until rt.Err() satisfies ok.
func waitErr(t *testing.T, rt *dispatch.Dispatcher, ok func(error) bool, what string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 5*time.Millisecond, waitTimeout, true, func(context.Context) (bool, error) {
		return ok(rt.Err()), nil
	})
	if err != nil {
		t.Fatalf("waiting for the runtime to %s: Err() = %v", what, rt.Err())
	}
}

// A journal that fails to take a function's events (a full disk) used to
// make Run return, and `flotilla serve` exit. The runtime now stalls
// visibly (Err, for /healthz) and, once the journal works again, carries on
// from the same event: nothing is lost.
func TestRuntimeStallsWhileTheJournalFails(t *testing.T) {
	s := newStore(t)
	j := &journalFailing{Store: s, err: errors.New("writing journal: no space left on device")}
	j.appends.Store(true)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeOut)}
	reg := prometheus.NewRegistry()
	rt, err := dispatch.New(j, []dispatch.Function{a}, dispatch.Options{StallBackoff: time.Millisecond, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn))
	stop := start(t, rt)
	waitErr(t, rt, func(err error) bool { return err != nil && strings.Contains(err.Error(), "no space left on device") }, "stall")
	if n := counterValue(t, reg, "flotilla_dispatch_stalls_total"); n < 1 {
		t.Errorf("flotilla_dispatch_stalls_total = %v, want >= 1", n)
	}
	j.appends.Store(false)
	waitJournal(t, s, "e1/"+typeOut, "e2/"+typeOut)
	waitErr(t, rt, func(err error) bool { return err == nil }, "resume")
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// A dispatcher whose cursor could not be read at start (NATS busy past
// its bound, in scale-out mode) used to return from Run at once, leaving its
// partition held and unhandled: a rollout never started. It now stalls
// visibly and starts once the read works.
func TestRuntimeRetriesReadingItsCursor(t *testing.T) {
	s := newStore(t)
	j := &journalFailing{Store: s, err: errors.New("nats: timeout")}
	j.reads.Store(true)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeOut)}
	rt, err := dispatch.New(j, []dispatch.Function{a}, dispatch.Options{StallBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	stop := start(t, rt)
	waitErr(t, rt, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "reading dispatch cursor") && strings.Contains(err.Error(), "nats: timeout")
	}, "stall")
	j.reads.Store(false)
	waitJournal(t, s, "e1/"+typeOut)
	waitErr(t, rt, func(err error) bool { return err == nil }, "resume")
	if err := stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

// The cursor is saved in the background; after a save failed, the runtime
// handles no more events until one works (a restart replays a bounded
// window), and says why in Err. It used to return, ending `flotilla serve`.
func TestRuntimeStallsWhileTheCursorCannotBeSaved(t *testing.T) {
	s := newStore(t)
	j := &journalFailing{Store: s, err: errors.New("disk on fire")}
	j.saves.Store(true)
	calls := make(chan string, 100)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		calls <- e.ID()
		return nil, nil
	}}
	rt, err := dispatch.New(j, []dispatch.Function{a}, dispatch.Options{Batch: 1, StallBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start(t, rt)
	// The first event's cursor save fails: the runtime stalls. (The saver
	// runs beside the reader, so events appended together could all be
	// read before the first save fails; append the rest once it has.)
	appendEvents(t, s, newEvent(t, "e0", typeIn))
	waitErr(t, rt, func(err error) bool {
		return err != nil && strings.Contains(err.Error(), "disk on fire") && strings.Contains(err.Error(), "saving dispatch cursor")
	}, "stall")
	for i := 1; i < 5; i++ {
		appendEvents(t, s, newEvent(t, fmt.Sprintf("e%d", i), typeIn))
	}
	// Stalled: at most a batch read as the save failed joins e0; give the
	// reader many backoffs to (wrongly) read on.
	time.Sleep(100 * time.Millisecond)
	if n := len(calls); n > 2 {
		t.Errorf("the runtime handled %d events without saving its cursor", n)
	}
	j.saves.Store(false)
	waitCalls(t, calls, 5)
	waitErr(t, rt, func(err error) bool { return err == nil }, "resume")
	if c, err := s.Cursor(t.Context(), "runtime"); err != nil || c == 0 {
		t.Errorf("cursor = %d, %v: want it saved", c, err)
	}
}

// A function's events that the journal refuses for good (they would not
// read back) fail the function visibly instead of stalling the runtime.
func TestRuntimePermanentJournalRefusalFailsTheFunction(t *testing.T) {
	s := newStore(t)
	bad := &fn{name: "bad", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		out := newEvent(t, "out-"+e.ID(), typeOut)
		out.SetID(strings.Repeat("x", 64<<10)) // over the journal's id limit
		return []cloudevents.Event{out}, nil
	}}
	rt, err := dispatch.New(s, []dispatch.Function{bad}, dispatch.Options{StallBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	start(t, rt)
	recs := waitJournal(t, s, "e1/"+events.TypeFunctionFailed+"/bad")
	if rt.Err() != nil {
		t.Errorf("Err() = %v, want nil", rt.Err())
	}
	p, err := events.Decode[events.FunctionFailed](recs[len(recs)-1].Event)
	if err != nil || !p.Permanent || !strings.Contains(p.Error, "journaling its events") {
		t.Errorf("function.failed = %+v, %v: want a permanent journaling failure", p, err)
	}
}

// counterValue reads the counter name from reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// poisoned is the store with one record that reads back as not an event,
// as a record written before the journal checked read-back does.
type poisoned struct {
	*store.Store
	id string
}

func (p poisoned) Read(ctx context.Context, after uint64, limit int) ([]store.Record, error) {
	recs, err := p.Store.Read(ctx, after, limit)
	for i, r := range recs {
		if r.Event.ID() == p.id {
			recs[i] = store.Record{Seq: r.Seq, Err: errors.New(`parsing time "287396-10-12T08:59:00.993Z": year out of range`)}
		}
	}
	return recs, err
}

// One journal record that did not decode used to stop the runtime, and
// `flotilla serve` with it, on every start. It is now set aside, visibly,
// and the events after it are handled.
func TestRuntimeQuarantinesAnUnreadableRecord(t *testing.T) {
	s := newStore(t)
	calls := make(chan string, 10)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: func(_ context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
		calls <- e.ID()
		return nil, nil
	}}
	reg := prometheus.NewRegistry()
	rt, err := dispatch.New(poisoned{s, "e2"}, []dispatch.Function{a}, dispatch.Options{Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn), newEvent(t, "e2", typeIn), newEvent(t, "e3", typeIn))
	start(t, rt)
	if diff := cmp.Diff([]string{"e1", "e3"}, waitCalls(t, calls, 2), sortStrings); diff != "" {
		t.Errorf("handled (-want +got):\n%s", diff)
	}
	recs := waitJournal(t, s, "quarantined-2")
	q, err := events.Decode[events.EventQuarantined](recs[len(recs)-1].Event)
	if err != nil || q.Seq != 2 || !strings.Contains(q.Error, "year out of range") {
		t.Errorf("event.quarantined = %+v, %v", q, err)
	}
	if n := counterValue(t, reg, "flotilla_events_quarantined_total"); n != 1 {
		t.Errorf("flotilla_events_quarantined_total = %v, want 1", n)
	}
	if rt.Err() != nil {
		t.Errorf("Err() = %v, want nil", rt.Err())
	}
}

// sortStrings compares string slices as sets: events of different keys are
// handled in parallel, in no set order.
var sortStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// journalHung is the store on a disk that hangs while its switch is on:
// appends wait (as the store's do, for a commit that does not come) until
// their context ends; cursor saves block, whatever their context, until the
// disk comes back.
type journalHung struct {
	*store.Store
	appends, saves atomic.Bool
	back           chan struct{}
}

func (j *journalHung) Append(ctx context.Context, evs ...cloudevents.Event) ([]store.Record, error) {
	if j.appends.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("appending events (they may still be journaled): %w", ctx.Err())
	}
	return j.Store.Append(ctx, evs...)
}

func (j *journalHung) SetCursor(ctx context.Context, consumer string, seq uint64) error {
	if j.saves.Load() {
		<-j.back
	}
	return j.Store.SetCursor(ctx, consumer, seq)
}

// The dispatcher's own writes have a deadline: a hung disk stalls it
// visibly (Err) instead of hanging a worker, it carries on once the disk is
// back, and its shutdown returns while a cursor save hangs.
func TestDispatcherWritesHaveADeadline(t *testing.T) {
	s := newStore(t)
	j := &journalHung{Store: s, back: make(chan struct{})}
	j.appends.Store(true)
	a := &fn{name: "a", consumes: []string{typeIn}, handle: emit(typeOut)}
	rt, err := dispatch.New(j, []dispatch.Function{a}, dispatch.Options{StallBackoff: time.Millisecond, WriteTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, newEvent(t, "e1", typeIn))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	waitErr(t, rt, func(err error) bool { return err != nil && errors.Is(err, context.DeadlineExceeded) }, "stall on the hung append")
	j.appends.Store(false)
	waitJournal(t, s, "e1/"+typeOut)

	j.saves.Store(true)
	defer close(j.back)
	appendEvents(t, s, newEvent(t, "e2", typeIn))
	waitJournal(t, s, "e2/"+typeOut)
	began := time.Now()
	cancel()
	select {
	case err = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return while a cursor save hung")
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "saving dispatch cursor") {
		t.Errorf("Run = %v; want the cursor save's deadline", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("stopping took %v while a cursor save hung", took)
	}
}
