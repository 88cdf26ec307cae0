package watch_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/watch"
)

func open(t *testing.T) (*store.Store, *embedded.Repo) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, embedded.NewRepo(s, nil)
}

func event(t *testing.T, id, typ, ro string, at time.Time) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, typ, map[string]string{"cluster": "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if ro != "" {
		e.SetExtension(events.ExtRolloutID, ro)
	}
	if !at.IsZero() {
		e.SetTime(at)
	}
	return e
}

func create(t *testing.T, repo *embedded.Repo, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if _, err := repo.Create(context.Background(), rollout.Rollout{ID: id, Application: "app", Phase: rollout.Progressing,
			Created: time.Now().Add(-time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
}

// received reads n messages (kind:rollout:type-or-phase) from sub.
func received(t *testing.T, sub *watch.Sub, n int) []string {
	t.Helper()
	var out []string
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case m, ok := <-sub.C:
			if !ok {
				t.Fatalf("watcher closed after %v", out)
			}
			what := ""
			switch m.Kind {
			case watch.KindEvent:
				var e watch.Entry
				if err := json.Unmarshal(m.Data, &e); err != nil {
					t.Fatal(err)
				}
				what = e.Type
			case watch.KindRollout:
				var r rollout.Rollout
				if err := json.Unmarshal(m.Data, &r); err != nil {
					t.Fatal(err)
				}
				what = string(r.Phase)
			}
			out = append(out, m.Kind+":"+m.Rollout+":"+what)
		case <-timeout:
			t.Fatalf("got %v, want %d messages", out, n)
		}
	}
	return out
}

func runHub(t *testing.T, h *watch.Hub) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestHubFansOut(t *testing.T) {
	s, repo := open(t)
	create(t, repo, "r1", "r2")
	ctx := context.Background()
	// Appended before anyone watches: never sent.
	if _, err := s.Append(ctx, event(t, "old", events.TypeWaveStarted, "r1", time.Time{})); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := watch.New(s, repo, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	runHub(t, h)
	all, one, states := h.Subscribe("", true), h.Subscribe("r1", true), h.Subscribe("", false)
	defer all.Close()
	defer one.Close()
	defer states.Close()
	if _, err := s.Append(ctx,
		event(t, "a", events.TypeClusterApplied, "r1", time.Time{}),
		event(t, "b", events.TypeClusterApplied, "r2", time.Time{}),
		event(t, "c", events.TypeImagePushed, "", time.Time{}),
		event(t, "d", events.TypeClusterSucceeded, "r1", time.Time{}),
	); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"event:r1:" + events.TypeClusterApplied, "event:r2:" + events.TypeClusterApplied,
		"event::" + events.TypeImagePushed, "event:r1:" + events.TypeClusterSucceeded,
		"rollout:r1:Progressing", "rollout:r2:Progressing",
	}
	if diff := cmp.Diff(want, received(t, all, len(want))); diff != "" {
		t.Errorf("every rollout (-want +got):\n%s", diff)
	}
	want = []string{"event:r1:" + events.TypeClusterApplied, "event:r1:" + events.TypeClusterSucceeded, "rollout:r1:Progressing"}
	if diff := cmp.Diff(want, received(t, one, len(want))); diff != "" {
		t.Errorf("rollout r1 (-want +got):\n%s", diff)
	}
	want = []string{"rollout:r1:Progressing", "rollout:r2:Progressing"}
	if diff := cmp.Diff(want, received(t, states, len(want))); diff != "" {
		t.Errorf("states only (-want +got):\n%s", diff)
	}
	if got := testutil.ToFloat64(h.Watchers()); got != 3 {
		t.Errorf("flotilla_watchers = %v, want 3", got)
	}
}

// A watcher that subscribes before the hub's loop has started still gets
// what is appended after it subscribed (the loop reads from the hub's
// making, not from its own start).
func TestHubSendsWhatFollowsASubscribeBeforeRun(t *testing.T) {
	s, repo := open(t)
	create(t, repo, "r1")
	h, err := watch.New(s, repo, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := h.Subscribe("r1", true)
	defer sub.Close()
	if _, err := s.Append(context.Background(), event(t, "a", events.TypeClusterApplied, "r1", time.Time{})); err != nil {
		t.Fatal(err)
	}
	runHub(t, h)
	want := []string{"event:r1:" + events.TypeClusterApplied, "rollout:r1:Progressing"}
	if diff := cmp.Diff(want, received(t, sub, len(want))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Appends within the interval reach watchers as one batch: the rollout's
// state once, after all of its events.
func TestHubGathersABurst(t *testing.T) {
	s, repo := open(t)
	create(t, repo, "r1")
	h, err := watch.New(s, repo, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.WithInterval(time.Second) // the appends below take microseconds
	runHub(t, h)
	sub := h.Subscribe("", true)
	defer sub.Close()
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Append(ctx, event(t, id, events.TypeClusterApplied, "r1", time.Time{})); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"event:r1:" + events.TypeClusterApplied, "event:r1:" + events.TypeClusterApplied, "event:r1:" + events.TypeClusterApplied,
		"rollout:r1:Progressing",
	}
	if diff := cmp.Diff(want, received(t, sub, len(want))); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHubDropsASlowWatcher(t *testing.T) {
	s, repo := open(t)
	create(t, repo, "r1")
	h, err := watch.New(s, repo, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.WithBuffer(2)
	runHub(t, h)
	slow, fast := h.Subscribe("", true), h.Subscribe("r1", true)
	defer fast.Close()
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.Append(ctx, event(t, "e"+string(rune('0'+i)), events.TypeClusterApplied, "r1", time.Time{})); err != nil {
			t.Fatal(err)
		}
		received(t, fast, 1)
	}
	for range 2 {
		<-slow.C
	}
	if _, ok := <-slow.C; ok {
		t.Fatal("the watcher that fell behind is still served")
	}
	slow.Close() // closing a dropped watcher is fine
}

func TestHubClosesWatchersWhenItStops(t *testing.T) {
	s, repo := open(t)
	h, err := watch.New(s, repo, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- h.Run(ctx) }()
	sub := h.Subscribe("", true)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.C; ok {
		t.Fatal("watcher open after the hub stopped")
	}
	if _, ok := <-h.Subscribe("", true).C; ok {
		t.Fatal("a stopped hub took a watcher")
	}
}

func TestTimeline(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).UTC()
	var evs []cloudevents.Event
	// Another rollout long before, then r1 and r2 interleaved, then
	// events well after r1 ended.
	evs = append(evs, event(t, "x0", events.TypeRolloutStarted, "r0", t0.Add(-time.Hour)))
	for i, ro := range []string{"r1", "r2", "r1", "r2", "r1"} {
		evs = append(evs, event(t, "e"+string(rune('0'+i)), events.TypeClusterApplied, ro, t0.Add(time.Duration(i)*time.Second)))
	}
	evs = append(evs, event(t, "late", events.TypeRolloutRetryRequested, "r1", t0.Add(time.Hour)))
	if _, err := s.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	ids := func(tl watch.TimelineOf) []string {
		var out []string
		for _, e := range tl.Events {
			out = append(out, e.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ro   rollout.Rollout
		want []string
	}{
		{"in flight: to the journal's end", rollout.Rollout{ID: "r1", Phase: rollout.Progressing, Created: t0}, []string{"e0", "e2", "e4", "late"}},
		{"ended: to shortly after its end", rollout.Rollout{ID: "r1", Phase: rollout.Succeeded, Created: t0, Updated: t0.Add(5 * time.Second)}, []string{"e0", "e2", "e4"}},
		{"other rollout", rollout.Rollout{ID: "r2", Phase: rollout.Failed, Created: t0, Updated: t0.Add(5 * time.Second)}, []string{"e1", "e3"}},
		{"long before", rollout.Rollout{ID: "r0", Phase: rollout.Succeeded, Created: t0.Add(-time.Hour), Updated: t0.Add(-time.Hour)}, []string{"x0"}},
		{"unknown", rollout.Rollout{ID: "nope", Phase: rollout.Progressing, Created: t0}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl, err := watch.Timeline(ctx, s, tc.ro)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, ids(tl)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tl.Truncated {
				t.Error("truncated")
			}
		})
	}
}
