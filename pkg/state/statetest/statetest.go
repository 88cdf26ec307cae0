// Package statetest is the contract every adapter of pkg/state passes: run
// [Run] from the adapter's tests.
package statetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state"
)

// Open returns fresh, empty state and the bus its events go to.
type Open func(t *testing.T) (state.Rollouts, bus.Bus)

// Run runs the contract against the adapter open makes.
func Run(t *testing.T, open Open) {
	t.Helper()
	t.Run("CreateGetUpdate", func(t *testing.T) { createGetUpdate(t, open) })
	t.Run("NoLostUpdates", func(t *testing.T) { noLostUpdates(t, open) })
	t.Run("UpdateEmitPutsEventsOnTheBus", func(t *testing.T) { updateEmit(t, open) })
	t.Run("UpdateEmitSchedulesEventsDueLater", func(t *testing.T) { updateEmitTimer(t, open) })
	t.Run("FinishedRolloutsAreArchived", func(t *testing.T) { archived(t, open) })
	t.Run("Phase", func(t *testing.T) { phase(t, open) })
	t.Run("Applications", func(t *testing.T) { applications(t, open) })
	t.Run("Fleet", func(t *testing.T) { fleet(t, open) })
}

func sample(id string) rollout.Rollout {
	return rollout.Rollout{
		ID: id, Application: "shop", Image: "registry.test/shop", Tag: "1.0.0", Digest: "sha256:1", Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}},
	}
}

func createGetUpdate(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	if _, err := s.Get(ctx, "r1"); !errors.Is(err, rollout.ErrNotFound) {
		t.Fatalf("Get of nothing = %v, want ErrNotFound", err)
	}
	if created, err := s.Create(ctx, sample("r1")); !created || err != nil {
		t.Fatalf("Create = %v, %v", created, err)
	}
	if created, err := s.Create(ctx, sample("r1")); created || err != nil {
		t.Fatalf("Create again = %v, %v; want not created", created, err)
	}
	got, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	v := got.Version
	got, err = s.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Wave = 0; r.Reason = "x"; return nil })
	if err != nil || got.Reason != "x" || got.Version <= v {
		t.Fatalf("Update = %+v, %v; want reason x and a newer version than %d", got, err, v)
	}
	boom := errors.New("boom")
	if _, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Reason = "y"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update whose fn fails = %v, want boom", err)
	}
	if got, _ := s.Get(ctx, "r1"); got.Reason != "x" {
		t.Errorf("a failed update wrote %q", got.Reason)
	}
	if _, err := s.Update(ctx, "nope", func(*rollout.Rollout) error { return nil }); !errors.Is(err, rollout.ErrNotFound) {
		t.Errorf("Update of nothing = %v, want ErrNotFound", err)
	}
}

func noLostUpdates(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	if _, err := s.Create(ctx, sample("r1")); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(ctx, "r1")
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error {
				r.Failures = append(r.Failures, rollout.Failure{EventID: fmt.Sprint(i)})
				return nil
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Failures) != n || got.Version != before.Version+n {
		t.Errorf("after %d concurrent updates: %d changes kept, version %d (was %d)", n, len(got.Failures), got.Version, before.Version)
	}
}

func updateEmit(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, b := open(t)
	if _, err := s.Create(ctx, sample("r1")); err != nil {
		t.Fatal(err)
	}
	e, err := events.New("step-1", events.Source, "dev.flotilla.statetest.v1", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	ro, out, err := s.UpdateEmit(ctx, "r1", func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		r.Waves[0].Clusters[0].Phase = rollout.ClusterApplying
		return []cloudevents.Event{e}, nil
	})
	if err != nil || len(out) != 1 || ro.Waves[0].Clusters[0].Phase != rollout.ClusterApplying {
		t.Fatalf("UpdateEmit = %v, %d events, %v", ro.Waves[0].Clusters[0].Phase, len(out), err)
	}
	recs, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Event.ID() != "step-1" {
		t.Errorf("bus after UpdateEmit: %v", recs)
	}
}

// updateEmitTimer: an event an update emits due later (a deadline) is a
// timer of the bus, not on it before it is due; the others are on it.
func updateEmitTimer(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, b := open(t)
	if _, err := s.Create(ctx, sample("r1")); err != nil {
		t.Fatal(err)
	}
	now, err := events.New("now-1", events.Source, "dev.flotilla.statetest.v1", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	later, err := events.New("deadline-1", events.Source, "dev.flotilla.statetest.deadline.v1", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(time.Hour)
	later = events.At(later, due)
	if _, _, err := s.UpdateEmit(ctx, "r1", func(*rollout.Rollout) ([]cloudevents.Event, error) {
		return []cloudevents.Event{now, later}, nil
	}); err != nil {
		t.Fatal(err)
	}
	recs, err := b.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.Event.ID())
	}
	if diff := cmp.Diff([]string{"now-1"}, ids); diff != "" {
		t.Errorf("bus after UpdateEmit (-want +got):\n%s", diff)
	}
	next, ok, err := b.NextDue(ctx)
	if err != nil || !ok || next.Sub(due).Abs() > time.Second {
		t.Errorf("NextDue = %v, %v, %v; want the deadline %v", next, ok, err, due)
	}
}

// phase: Phase answers what Get's rollout says, through its updates, a
// commit under way (the phase committed before it), and the archive.
func phase(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	if _, err := s.Phase(ctx, "r1"); !errors.Is(err, rollout.ErrNotFound) {
		t.Fatalf("Phase of nothing = %v, want ErrNotFound", err)
	}
	if _, err := s.Create(ctx, sample("r1")); err != nil {
		t.Fatal(err)
	}
	want := func(step string, p rollout.Phase) {
		t.Helper()
		if got, err := s.Phase(ctx, "r1"); err != nil || got != p {
			t.Errorf("%s: Phase = %q, %v; want %q", step, got, err, p)
		}
	}
	want("created", rollout.Progressing)
	if _, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error {
		r.Phase = rollout.Failed
		// Not committed yet: the phase is the one before.
		want("during its update", rollout.Progressing)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want("updated", rollout.Failed)
	boom := errors.New("boom")
	if _, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Phase = rollout.Succeeded; return boom }); !errors.Is(err, boom) {
		t.Fatalf("Update whose fn fails = %v", err)
	}
	want("after an update that failed", rollout.Failed)
	if _, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Phase = rollout.RolledBack; return nil }); err != nil {
		t.Fatal(err)
	}
	want("finished (archived)", rollout.RolledBack)
}

func archived(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	for i, id := range []string{"r1", "r2", "r3"} {
		ro := sample(id)
		ro.Tag = fmt.Sprintf("1.0.%d", i)
		if _, err := s.Create(ctx, ro); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	for id, p := range map[string]rollout.Phase{"r1": rollout.Succeeded, "r2": rollout.RolledBack} {
		if _, err := s.Update(ctx, id, func(r *rollout.Rollout) error { r.Phase = p; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ros []rollout.Rollout) []string {
		var out []string
		for _, r := range ros {
			out = append(out, r.ID)
		}
		return out
	}
	inFlight, err := s.ListInFlight(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r3"}, ids(inFlight)); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	if got, err := s.Get(ctx, "r1"); err != nil || got.Phase != rollout.Succeeded {
		t.Errorf("Get of a finished rollout = %s, %v", got.Phase, err)
	}
	if got, err := s.Update(ctx, "r1", func(r *rollout.Rollout) error { r.Reason = "late"; return nil }); err != nil || got.Reason != "" {
		t.Errorf("Update of a finished rollout = %q, %v; want it unchanged", got.Reason, err)
	}
	if created, err := s.Create(ctx, sample("r1")); created || err != nil {
		t.Errorf("Create of a finished rollout = %v, %v", created, err)
	}
	page, err := s.List(ctx, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r3", "r2"}, ids(page.Rollouts)); diff != "" || page.Next == "" {
		t.Errorf("first page (-want +got):\n%s (next %q)", diff, page.Next)
	}
	page, err = s.List(ctx, page.Next, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"r1"}, ids(page.Rollouts)); diff != "" || page.Next != "" {
		t.Errorf("second page (-want +got):\n%s (next %q)", diff, page.Next)
	}
}

func applications(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	if got, err := s.App(ctx, "shop"); err != nil || !reflect.DeepEqual(got, rollout.AppState{Name: "shop"}) {
		t.Fatalf("App of nothing = %+v, %v", got, err)
	}
	if err := s.UpdateApp(ctx, "shop", func(a *rollout.AppState) error { a.DeployedTag = "1.0.0"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := s.App(ctx, "shop"); err != nil || got.DeployedTag != "1.0.0" {
		t.Errorf("App = %+v, %v", got, err)
	}
	// What flotilla saw of its pushes is kept whole (the API's
	// applications read it back).
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	hook := rollout.Seen{Tag: "1.0.0", Digest: "sha256:a", Source: rollout.SourceWebhook, At: at, EventID: "h1"}
	poll := rollout.Seen{Tag: "1.1.0", Digest: "sha256:b", Source: rollout.SourcePoll, At: at.Add(time.Minute), EventID: "p1", Error: "registry: 503"}
	skip := rollout.Skipped{Tag: "2.0.0", Source: rollout.SourceWebhook, Outcome: rollout.OutcomeSkipped, Reason: "outside the track", At: at, EventID: "h2"}
	want := rollout.AppState{Name: "shop", DeployedTag: "1.0.0", DeployedRollout: "shop-1", DeployedAt: at,
		LastSeen: &poll, LastWebhook: &hook, LastSkipped: &skip,
		WebhookSilent: &rollout.Silence{Tag: "1.1.0", Digest: "sha256:b", Found: at.Add(time.Minute), EventID: "p1", LastWebhook: &hook}}
	if err := s.UpdateApp(ctx, "shop", func(a *rollout.AppState) error {
		a.DeployedRollout, a.DeployedAt = want.DeployedRollout, want.DeployedAt
		a.LastSeen, a.LastWebhook, a.LastSkipped, a.WebhookSilent = want.LastSeen, want.LastWebhook, want.LastSkipped, want.WebhookSilent
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.App(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("App (-want +got):\n%s", diff)
	}
}

func fleet(t *testing.T, open Open) {
	t.Helper()
	ctx := context.Background()
	s, _ := open(t)
	if st, err := s.Fleet(ctx); err != nil || st.Stopped {
		t.Fatalf("Fleet of a new state = %+v, %v; want running", st, err)
	}
	if err := s.UpdateFleet(ctx, func(f *rollout.FleetState) error { f.Stopped, f.By = true, "ann"; return nil }); err != nil {
		t.Fatal(err)
	}
	if st, err := s.Fleet(ctx); err != nil || !st.Stopped || st.By != "ann" {
		t.Errorf("Fleet after stopping = %+v, %v", st, err)
	}
}
