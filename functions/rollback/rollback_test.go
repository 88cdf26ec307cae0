package rollback_test

import (
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/rollback"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	ref       = image + "@sha256:new"
)

// prev is what cluster c ran before the rollout.
func prev(c string) string { return image + "@sha256:old-" + c }

// fakeStatus stands in for the clusters' canary status: each cluster's
// status is what the test set last, for the canary of workload (app()'s when
// zero).
type fakeStatus struct {
	workload config.Workload

	mu sync.Mutex
	st map[string]cluster.CanaryStatus
}

func (f *fakeStatus) set(cl string, st cluster.CanaryStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.st == nil {
		f.st = map[string]cluster.CanaryStatus{}
	}
	f.st[cl] = st
}

func (f *fakeStatus) CanaryStatus(_ context.Context, cl, namespace string, w config.Workload) (cluster.CanaryStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	want := f.workload
	if want == (config.Workload{}) {
		want = app().Workload
	}
	st, ok := f.st[cl]
	if !ok || namespace != "web" || w != want {
		return cluster.CanaryStatus{}, errors.New("no canary")
	}
	return st, nil
}

// settledOn is a canary at rest with both workloads on img.
func settledOn(img string) cluster.CanaryStatus {
	return cluster.CanaryStatus{Phase: "Succeeded", PrimaryImage: img, TargetImage: img}
}

// analysing is a canary Flagger is still working on.
func analysing(c string) cluster.CanaryStatus {
	return cluster.CanaryStatus{Phase: "Progressing", PrimaryImage: prev(c), TargetImage: ref}
}

func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute}},
	}
}

func hooks(clusterName, rolloutID string) canary.EventHook {
	return canary.EventHook{URL: "http://flotilla.test/hooks/flagger/s3cret",
		Metadata: map[string]string{"cluster": clusterName, "rollout": rolloutID}}
}

func newFunction(repo *rollout.Repo, exec *functiontest.FakeExecutor, status *fakeStatus) *rollback.Function {
	return rollback.New(&config.Config{Applications: []config.Application{app()}}, repo, exec, status, hooks, 0)
}

// failedRollout stores a rollout that failed in its second wave: c1 took the
// digest in wave 1; in wave 2 c2 failed and c3 is mid-analysis; wave 3 (c4)
// never started.
func failedRollout(t *testing.T, repo *rollout.Repo, change func(*rollout.Rollout)) {
	t.Helper()
	c := func(name string, p rollout.ClusterPhase) rollout.Cluster {
		return rollout.Cluster{Name: name, Phase: p, PreviousImage: prev(name)}
	}
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.3.0", Digest: "sha256:new",
		Phase: rollout.Failed, Reason: "wave 2 (rest): cluster c2 failed: analysis", Wave: 1,
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{c("c1", rollout.ClusterSucceeded)}},
			{Name: "rest", Clusters: []rollout.Cluster{c("c2", rollout.ClusterFailed), c("c3", rollout.ClusterProgressing)}},
			{Name: "last", Clusters: []rollout.Cluster{{Name: "c4", Phase: rollout.ClusterPending}}},
		},
	}
	if change != nil {
		change(&ro)
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
}

func rolloutFailed(t *testing.T) cloudevents.Event {
	t.Helper()
	e, err := events.New("failed", events.Source, events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID, Reason: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func clusterReverted(t *testing.T, id, cl string) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, events.TypeClusterReverted, events.ClusterResult{RolloutID: rolloutID, Cluster: cl, Reason: "observed"})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func reverted(parent string, wave int, cl, phase string) functiontest.Emitted {
	return functiontest.Emitted{ID: parent + "/" + events.TypeClusterReverted + "/" + cl, Type: events.TypeClusterReverted, RolloutID: rolloutID,
		Data: events.ClusterResult{RolloutID: rolloutID, Wave: wave, Cluster: cl, Reason: "previous image restored; Flagger phase " + phase}}
}

func phases(t *testing.T, repo *rollout.Repo) (rollout.Phase, map[string]rollout.ClusterPhase) {
	t.Helper()
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]rollout.ClusterPhase{}
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			m[c.Name] = c.Phase
		}
	}
	return ro.Phase, m
}

// TestRollbackWaveByWave drives a whole rollback as the runtime would: the
// newest wave first, the next only once it is reverted.
func TestRollbackWaveByWave(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, nil)
	exec := newExecutor()
	status := &fakeStatus{}
	fn := newFunction(repo, exec, status)

	// c2 had failed: after the revert it is settled on its previous image
	// at once. c3 was caught mid-analysis.
	status.set("c2", settledOn(prev("c2")))
	status.set("c3", analysing("c3"))
	status.set("c1", settledOn(prev("c1")))

	type step struct {
		name        string
		e           cloudevents.Event
		before      func()
		wantApplied []string
		want        []functiontest.Emitted
		wantPhase   rollout.Phase
		wantC       map[string]rollout.ClusterPhase
	}
	steps := []step{
		{
			name: "rollout failed: the newest wave that took the digest is reverted", e: rolloutFailed(t),
			wantApplied: []string{"c2", "c3"},
			want:        []functiontest.Emitted{reverted("failed", 1, "c2", "Succeeded")},
			wantPhase:   rollout.Failed,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterReverting,
				"c3": rollout.ClusterReverting, "c4": rollout.ClusterPending},
		},
		{
			name: "rollout failed redelivered: the wave is being reverted", e: rolloutFailed(t),
			wantPhase: rollout.Failed,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterReverting,
				"c3": rollout.ClusterReverting, "c4": rollout.ClusterPending},
		},
		{
			name: "c2 reverted; c3 still analysing: wait", e: clusterReverted(t, "r-c2", "c2"),
			wantPhase: rollout.Failed,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterReverted,
				"c3": rollout.ClusterReverting, "c4": rollout.ClusterPending},
		},
		{
			name: "c3 reverted: the older wave is reverted", e: clusterReverted(t, "r-c3", "c3"),
			before:      func() { status.set("c3", settledOn(prev("c3"))) },
			wantApplied: []string{"c1"},
			want:        []functiontest.Emitted{reverted("r-c3", 0, "c1", "Succeeded")},
			wantPhase:   rollout.Failed,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterReverting, "c2": rollout.ClusterReverted,
				"c3": rollout.ClusterReverted, "c4": rollout.ClusterPending},
		},
		{
			name: "c1 reverted: rolled back", e: clusterReverted(t, "r-c1", "c1"),
			want: []functiontest.Emitted{{ID: "r-c1/" + events.TypeRolloutRolledBack + "/" + rolloutID, Type: events.TypeRolloutRolledBack, RolloutID: rolloutID,
				Data: events.RolloutResult{RolloutID: rolloutID, Reason: "wave 2 (rest): cluster c2 failed: analysis"}}},
			wantPhase: rollout.RolledBack,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterReverted, "c2": rollout.ClusterReverted,
				"c3": rollout.ClusterReverted, "c4": rollout.ClusterPending},
		},
		{
			name: "a late duplicate changes nothing", e: clusterReverted(t, "r-c3", "c3"),
			wantPhase: rollout.RolledBack,
			wantC: map[string]rollout.ClusterPhase{"c1": rollout.ClusterReverted, "c2": rollout.ClusterReverted,
				"c3": rollout.ClusterReverted, "c4": rollout.ClusterPending},
		},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		evs, err := fn.Handle(ctx, s.e)
		if err != nil {
			t.Fatalf("%s: Handle: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, summarize(t, evs)); diff != "" {
			t.Errorf("%s: functiontest.Emitted (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(s.wantApplied, exec.Take()); diff != "" {
			t.Errorf("%s: clusters reverted (-want +got):\n%s", s.name, diff)
		}
		phase, cs := phases(t, repo)
		if phase != s.wantPhase {
			t.Errorf("%s: rollout phase %s, want %s", s.name, phase, s.wantPhase)
		}
		if diff := cmp.Diff(s.wantC, cs); diff != "" {
			t.Errorf("%s: cluster phases (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestRollbackApplyParams(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) {
		r.Waves = r.Waves[:1]
		r.Wave = 0
	})
	exec := newExecutor()
	before := time.Now().UTC()
	if _, err := newFunction(repo, exec, &fakeStatus{}).Handle(t.Context(), rolloutFailed(t)); err != nil {
		t.Fatal(err)
	}
	want := map[string][]tasks.ApplyCanaryParams{"c1": {{
		Rollout: rolloutID + "-revert", Namespace: "web", Kind: "Deployment", Workload: "shop-api", Container: "api", Image: prev("c1"),
		Canary: canary.Render(app(), canary.Input{Cluster: "c1", Rollout: rolloutID, Event: hooks("c1", rolloutID), SkipAnalysis: true}).Canary,
	}}}
	if diff := cmp.Diff(want, exec.Applied()); diff != "" {
		t.Errorf("revert applied (-want +got):\n%s", diff)
	}
	if !exec.Applied()["c1"][0].Canary.Spec.SkipAnalysis {
		t.Error("a revert runs Flagger's analysis again")
	}
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	// Applied tells resync which Flagger transitions come after the revert.
	if c, _, _ := ro.Cluster("c1"); c.Applied.Before(before) {
		t.Errorf("Applied = %s, want the time of the revert (after %s)", c.Applied, before)
	}
}

// TestRollbackDaemonSet reverts a DaemonSet and reads the DaemonSets back
// to tell it is reverted.
func TestRollbackDaemonSet(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) {
		r.Waves = r.Waves[:1]
		r.Wave = 0
	})
	ds := app()
	ds.Workload = config.Workload{Kind: config.KindDaemonSet, Name: "shop-agent"}
	exec := newExecutor()
	status := &fakeStatus{workload: ds.Workload}
	status.set("c1", settledOn(prev("c1")))
	fn := rollback.New(&config.Config{Applications: []config.Application{ds}}, repo, exec, status, hooks, 0)
	evs, err := fn.Handle(t.Context(), rolloutFailed(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]functiontest.Emitted{reverted("failed", 0, "c1", "Succeeded")}, summarize(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	if p := exec.Applied()["c1"]; len(p) != 1 || p[0].Kind != config.KindDaemonSet || p[0].Workload != "shop-agent" {
		t.Errorf("revert applied %+v, want the DaemonSet shop-agent", p)
	}
}

func TestRollbackNothingToDo(t *testing.T) {
	tests := []struct {
		name  string
		phase rollout.Phase
	}{
		{"progressing", rollout.Progressing},
		{"succeeded", rollout.Succeeded},
		{"rolled back", rollout.RolledBack},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			failedRollout(t, repo, func(r *rollout.Rollout) { r.Phase = tt.phase })
			exec := newExecutor()
			evs, err := newFunction(repo, exec, &fakeStatus{}).Handle(t.Context(), rolloutFailed(t))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %v, %v; want nothing", evs, err)
			}
			if got := exec.Take(); len(got) != 0 {
				t.Errorf("reverted %v", got)
			}
			if phase, _ := phases(t, repo); phase != tt.phase {
				t.Errorf("phase changed to %s", phase)
			}
		})
	}
}

// TestRollbackNothingTookTheDigest: a rollout whose only cluster failed
// before the pipeline recorded what it ran has nothing to revert.
func TestRollbackNothingTookTheDigest(t *testing.T) {
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, func(r *rollout.Rollout) {
		r.Wave = 0
		r.Waves = []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterFailed}}}}
	})
	exec := newExecutor()
	evs, err := newFunction(repo, exec, &fakeStatus{}).Handle(t.Context(), rolloutFailed(t))
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(t, evs)
	if len(got) != 1 || got[0].Type != events.TypeRolloutRolledBack {
		t.Errorf("emitted %+v, want rollout.rolledback", got)
	}
	if applied := exec.Take(); len(applied) != 0 {
		t.Errorf("reverted %v", applied)
	}
}

// TestRollbackRetriesAFailedRevert checks that a revert interrupted by a
// retryable error is applied again when the runtime retries the event,
// instead of waiting forever for clusters that were never reverted.
func TestRollbackRetriesAFailedRevert(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	failedRollout(t, repo, nil)
	errDown := errors.New("apiserver unavailable")
	var mu sync.Mutex
	down := true
	exec := &functiontest.FakeExecutor{Func: func(_ context.Context, cl string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if cl == "c3" && down {
			return tasks.ApplyCanaryResult{}, errDown
		}
		return tasks.ApplyCanaryResult{PreviousImage: ref, Changed: true}, nil
	}}
	status := &fakeStatus{}
	status.set("c2", settledOn(prev("c2")))
	status.set("c3", settledOn(prev("c3")))
	fn := newFunction(repo, exec, status)

	evs, err := fn.Handle(ctx, rolloutFailed(t))
	if err == nil || events.IsPermanent(err) || !errors.Is(err, errDown) {
		t.Fatalf("Handle = %v, %v; want a retryable error wrapping %v", evs, err, errDown)
	}
	exec.Take()
	if _, cs := phases(t, repo); cs["c3"] == rollout.ClusterReverting {
		t.Errorf("c3 is Reverting though its revert failed")
	}

	mu.Lock()
	down = false
	mu.Unlock()
	evs, err = fn.Handle(ctx, rolloutFailed(t))
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if diff := cmp.Diff([]string{"c2", "c3"}, exec.Take()); diff != "" {
		t.Errorf("retry reverted (-want +got):\n%s", diff)
	}
	want := []functiontest.Emitted{reverted("failed", 1, "c2", "Succeeded"), reverted("failed", 1, "c3", "Succeeded")}
	if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
		t.Errorf("retry functiontest.Emitted (-want +got):\n%s", diff)
	}
}

func TestRollbackErrors(t *testing.T) {
	errDenied := events.Permanent(errors.New("forbidden"))
	bad := rolloutFailed(t)
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`[1]`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		cfg   *config.Config
		apply func(string) error
		e     cloudevents.Event
	}{
		{"payload does not decode", nil, nil, bad},
		{"cluster not in the rollout", nil, nil, clusterReverted(t, "r", "c9")},
		{"application no longer configured", &config.Config{}, nil, rolloutFailed(t)},
		{"pipeline fails permanently", nil, func(cl string) error {
			if cl == "c2" {
				return errDenied
			}
			return nil
		}, rolloutFailed(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			failedRollout(t, repo, nil)
			exec := newExecutor()
			if tt.apply != nil {
				exec.Func = func(_ context.Context, cl string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
					return tasks.ApplyCanaryResult{}, tt.apply(cl)
				}
			}
			cfg := tt.cfg
			if cfg == nil {
				cfg = &config.Config{Applications: []config.Application{app()}}
			}
			evs, err := rollback.New(cfg, repo, exec, &fakeStatus{}, hooks, 0).Handle(t.Context(), tt.e)
			if err == nil || !events.IsPermanent(err) {
				t.Errorf("Handle = %v, %v; want a permanent error", evs, err)
			}
		})
	}
}

func TestRollbackContract(t *testing.T) {
	fn := rollback.New(&config.Config{}, nil, nil, nil, nil, 0)
	if fn.Name() != "rollback" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeRolloutFailed, events.TypeClusterReverted}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// summarize summarizes evs sorted by id: rollback emits per cluster in
// parallel.
func summarize(t *testing.T, evs []cloudevents.Event) []functiontest.Emitted {
	t.Helper()
	got := functiontest.Summarize(t, evs, events.TypeClusterReverted, events.TypeRolloutRolledBack)
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	return got
}

// newExecutor is an executor that applies everywhere, reporting ref as the
// image the workload ran before.
func newExecutor() *functiontest.FakeExecutor {
	return &functiontest.FakeExecutor{Result: tasks.ApplyCanaryResult{PreviousImage: ref, Changed: true}}
}
