package launch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	digest    = "sha256:new"
	ref       = image + "@" + digest
	oldImage  = image + "@sha256:old"
)

// fakeStatus stands in for the clusters' canary status.
type fakeStatus struct {
	canaryStatus func(ctx context.Context, cluster, namespace string, w config.Workload) (cluster.CanaryStatus, error)
}

func (f fakeStatus) CanaryStatus(ctx context.Context, cl, namespace string, w config.Workload) (cluster.CanaryStatus, error) {
	if f.canaryStatus == nil {
		return cluster.CanaryStatus{}, errors.New("no status in this test")
	}
	return f.canaryStatus(ctx, cl, namespace, w)
}

func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Track: config.TrackMinorVersion, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
			// Something for the canary to refer to, which launch applies too.
			Autoscale: &config.Autoscale{MinReplicas: 1, MaxReplicas: 3},
		},
	}
}

func hooks(clusterName, rolloutID string) canary.EventHook {
	return canary.EventHook{
		URL:      "http://flotilla.test/hooks/flagger/s3cret",
		Metadata: map[string]string{"cluster": clusterName, "rollout": rolloutID},
	}
}

// newRollout stores a rollout of ref over two waves: c1, then c2 and c3.
func newRollout(t *testing.T, repo *rollout.Repo, change func(*rollout.Rollout)) {
	t.Helper()
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: digest, Phase: rollout.Progressing,
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}},
			{Name: "rest", Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterPending}, {Name: "c3", Phase: rollout.ClusterPending}}},
		},
	}
	if change != nil {
		change(&ro)
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
}

func waveStarted(t *testing.T, wave int, clusters ...string) cloudevents.Event {
	t.Helper()
	e, err := events.New("ws", events.Source, events.TypeWaveStarted, events.WaveStarted{RolloutID: rolloutID, Wave: wave, Clusters: clusters})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

// result is what a test compares of an emitted cluster result.
type result struct {
	ID, Type, RolloutID string
	Data                events.ClusterResult
}

func results(t *testing.T, evs []cloudevents.Event) []result {
	t.Helper()
	var got []result
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is invalid: %v", e.ID(), err)
		}
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, result{e.ID(), e.Type(), events.RolloutID(e), r})
	}
	// Clusters are launched in parallel: their events come in any order.
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	return got
}

func res(typ string, wave int, cl, reason string) result {
	return result{"ws/" + typ + "/" + cl, typ, rolloutID, events.ClusterResult{RolloutID: rolloutID, Wave: wave, Cluster: cl, Reason: reason}}
}

func newFunction(repo *rollout.Repo, exec *functiontest.FakeExecutor, status fakeStatus, maxParallel int) *launch.Function {
	cfg := &config.Config{Applications: []config.Application{app()}}
	return launch.New(cfg, repo, exec, status, hooks, maxParallel)
}

func TestLaunchAppliesEveryClusterOfTheWave(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, func(r *rollout.Rollout) {
		r.Wave = 1
		r.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
	})
	exec := newExecutor()
	start := time.Now()
	evs, err := newFunction(repo, exec, fakeStatus{}, 0).Handle(ctx, waveStarted(t, 1, "c2", "c3"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	want := []result{
		res(events.TypeClusterApplied, 1, "c2", ""),
		res(events.TypeClusterApplied, 1, "c3", ""),
	}
	if diff := cmp.Diff(want, results(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}

	wantParams := func(cl string) []tasks.ApplyCanaryParams {
		objs := canary.Render(app(), canary.Input{Cluster: cl, Rollout: rolloutID, Event: hooks(cl, rolloutID)})
		deps, err := objs.Dependencies()
		if err != nil {
			t.Fatal(err)
		}
		if len(deps) != 1 || deps[0].GetKind() != "HorizontalPodAutoscaler" {
			t.Fatalf("dependencies of the canary = %v, want the autoscaler", deps)
		}
		return []tasks.ApplyCanaryParams{{
			Rollout: rolloutID, Namespace: "web", Kind: "Deployment", Workload: "shop-api", Container: "api", Image: ref,
			Canary: objs.Canary, Objects: deps,
		}}
	}
	if diff := cmp.Diff(map[string][]tasks.ApplyCanaryParams{"c2": wantParams("c2"), "c3": wantParams("c3")}, exec.Applied()); diff != "" {
		t.Errorf("pipelines run (-want +got):\n%s", diff)
	}
	// The canary reports to flotilla's hook, which tells cluster and rollout.
	for cl, calls := range exec.Applied() {
		hs := calls[0].Canary.Spec.Analysis.Webhooks
		last := hs[len(hs)-1]
		if last.Type != flaggerv1.EventHook || last.URL != "http://flotilla.test/hooks/flagger/s3cret" {
			t.Errorf("%s: last webhook = %+v, want flotilla's event hook", cl, last)
		}
		if diff := cmp.Diff(map[string]string{"cluster": cl, "rollout": rolloutID}, *last.Metadata); diff != "" {
			t.Errorf("%s: event hook metadata (-want +got):\n%s", cl, diff)
		}
		if calls[0].Canary.Spec.SkipAnalysis {
			t.Errorf("%s: a launch skips the analysis", cl)
		}
	}

	ro, err := repo.Get(ctx, rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c2", "c3"} {
		c, _, _ := ro.Cluster(name)
		if c.Phase != rollout.ClusterProgressing || c.PreviousImage != oldImage {
			t.Errorf("%s: phase %s, previous image %q; want Progressing, %q", name, c.Phase, c.PreviousImage, oldImage)
		}
		if c.Applied.Before(start.Add(-time.Second)) || c.Applied.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: Applied = %s, want about now", name, c.Applied)
		}
	}
	if c, _, _ := ro.Cluster("c1"); c.Phase != rollout.ClusterSucceeded || !c.Applied.IsZero() {
		t.Errorf("c1 of an earlier wave changed: %+v", c)
	}
}

func TestLaunchOutcomes(t *testing.T) {
	errDenied := events.Permanent(errors.New("deployment web/shop-api not found"))
	errFlaky := errors.New("connection refused")
	settled := func(primary string) fakeStatus {
		return fakeStatus{canaryStatus: func(_ context.Context, _, ns string, w config.Workload) (cluster.CanaryStatus, error) {
			if ns != "web" || w != app().Workload {
				return cluster.CanaryStatus{}, errors.New("wrong canary asked for")
			}
			return cluster.CanaryStatus{Phase: "Succeeded", PrimaryImage: primary, TargetImage: primary}, nil
		}}
	}
	tests := []struct {
		name      string
		apply     func(cl string) (tasks.ApplyCanaryResult, error)
		status    fakeStatus
		want      []result
		wantPhase rollout.ClusterPhase
		wantPrev  string
		wantErr   bool
	}{
		{
			name: "applied",
			apply: func(string) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
			},
			want:      []result{res(events.TypeClusterApplied, 0, "c1", "")},
			wantPhase: rollout.ClusterProgressing, wantPrev: oldImage,
		},
		{
			name:      "permanent pipeline error fails the cluster",
			apply:     func(string) (tasks.ApplyCanaryResult, error) { return tasks.ApplyCanaryResult{}, errDenied },
			want:      []result{res(events.TypeClusterFailed, 0, "c1", "pipeline failed: deployment web/shop-api not found")},
			wantPhase: rollout.ClusterApplying,
		},
		{
			name:      "retryable pipeline error is returned",
			apply:     func(string) (tasks.ApplyCanaryResult, error) { return tasks.ApplyCanaryResult{}, errFlaky },
			wantErr:   true,
			wantPhase: rollout.ClusterApplying,
		},
		{
			name: "unchanged, primary already on the digest",
			apply: func(string) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{PreviousImage: oldImage}, nil
			},
			status:    settled(ref),
			want:      []result{res(events.TypeClusterSucceeded, 0, "c1", "already running "+ref)},
			wantPhase: rollout.ClusterProgressing, wantPrev: oldImage,
		},
		{
			name: "unchanged, primary still on the old image",
			apply: func(string) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{PreviousImage: oldImage}, nil
			},
			status:    settled(oldImage),
			want:      []result{res(events.TypeClusterApplied, 0, "c1", "")},
			wantPhase: rollout.ClusterProgressing, wantPrev: oldImage,
		},
		{
			name: "unchanged, status unreadable",
			apply: func(string) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{PreviousImage: oldImage}, nil
			},
			want:      []result{res(events.TypeClusterApplied, 0, "c1", "")},
			wantPhase: rollout.ClusterProgressing, wantPrev: oldImage,
		},
		{
			name: "changed: the status is not even read",
			apply: func(string) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
			},
			status:    settled(ref),
			want:      []result{res(events.TypeClusterApplied, 0, "c1", "")},
			wantPhase: rollout.ClusterProgressing, wantPrev: oldImage,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, nil)
			exec := &functiontest.FakeExecutor{Func: func(_ context.Context, cl string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
				return tt.apply(cl)
			}}
			evs, err := newFunction(repo, exec, tt.status, 0).Handle(ctx, waveStarted(t, 0, "c1"))
			if tt.wantErr {
				if err == nil || events.IsPermanent(err) || len(evs) != 0 {
					t.Fatalf("Handle = %v, %v; want a retryable error and no events", evs, err)
				}
				if !errors.Is(err, errFlaky) {
					t.Errorf("error %v does not wrap the pipeline's", err)
				}
			} else if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff(tt.want, results(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
			ro, err := repo.Get(ctx, rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := ro.Cluster("c1")
			if c.Phase != tt.wantPhase || c.PreviousImage != tt.wantPrev {
				t.Errorf("c1: phase %s, previous %q; want %s, %q", c.Phase, c.PreviousImage, tt.wantPhase, tt.wantPrev)
			}
		})
	}
}

// TestLaunchDaemonSet follows a DaemonSet: the pipeline patches a
// DaemonSet, and the "already running" check reads DaemonSets.
func TestLaunchDaemonSet(t *testing.T) {
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, nil)
	ds := app()
	ds.Workload = config.Workload{Kind: config.KindDaemonSet, Name: "shop-agent"}
	ds.Delivery.Autoscale = nil
	exec := &functiontest.FakeExecutor{Func: func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		return tasks.ApplyCanaryResult{PreviousImage: oldImage}, nil
	}}
	status := fakeStatus{canaryStatus: func(_ context.Context, _, ns string, w config.Workload) (cluster.CanaryStatus, error) {
		if ns != "web" || w != ds.Workload {
			return cluster.CanaryStatus{}, fmt.Errorf("asked for %+v in %s, want the DaemonSet", w, ns)
		}
		return cluster.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref}, nil
	}}
	cfg := &config.Config{Applications: []config.Application{ds}}
	evs, err := launch.New(cfg, repo, exec, status, hooks, 0).Handle(t.Context(), waveStarted(t, 0, "c1"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if diff := cmp.Diff([]result{res(events.TypeClusterSucceeded, 0, "c1", "already running "+ref)}, results(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	calls := exec.Applied()["c1"]
	if len(calls) != 1 || calls[0].Kind != config.KindDaemonSet || calls[0].Workload != "shop-agent" {
		t.Errorf("ApplyCanary calls = %+v, want one for DaemonSet shop-agent", calls)
	}
}

func TestLaunchNothingToDo(t *testing.T) {
	tests := []struct {
		name   string
		change func(*rollout.Rollout)
		wave   int
	}{
		{"rollout failed", func(r *rollout.Rollout) { r.Phase = rollout.Failed }, 0},
		{"rollout rolled back", func(r *rollout.Rollout) { r.Phase = rollout.RolledBack }, 0},
		{"rollout succeeded", func(r *rollout.Rollout) { r.Phase = rollout.Succeeded }, 0},
		{"rollout moved on to another wave", func(r *rollout.Rollout) { r.Wave = 1 }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tt.change)
			exec := newExecutor()
			evs, err := newFunction(repo, exec, fakeStatus{}, 0).Handle(t.Context(), waveStarted(t, tt.wave, "c1"))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %v, %v; want nothing", evs, err)
			}
			if calls := exec.Applied(); len(calls) != 0 {
				t.Errorf("pipelines run: %v", calls)
			}
		})
	}
}

func TestLaunchRecordsPreviousImageOnce(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, nil)
	// A re-run finds the workload on the new digest already; what it ran
	// before the rollout is what rollback must restore.
	prev := []string{oldImage, ref}
	var mu sync.Mutex
	exec := &functiontest.FakeExecutor{Func: func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		mu.Lock()
		defer mu.Unlock()
		p := prev[0]
		prev = prev[1:]
		return tasks.ApplyCanaryResult{PreviousImage: p, Changed: true}, nil
	}}
	fn := newFunction(repo, exec, fakeStatus{}, 0)
	for i := range 2 {
		evs, err := fn.Handle(ctx, waveStarted(t, 0, "c1"))
		if err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		if diff := cmp.Diff([]result{res(events.TypeClusterApplied, 0, "c1", "")}, results(t, evs)); diff != "" {
			t.Errorf("delivery %d functiontest.Emitted (-want +got):\n%s", i, diff)
		}
	}
	ro, err := repo.Get(ctx, rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := ro.Cluster("c1"); c.PreviousImage != oldImage || c.Phase != rollout.ClusterProgressing {
		t.Errorf("c1 after two launches: previous %q, phase %s; want %q, Progressing", c.PreviousImage, c.Phase, oldImage)
	}
}

// TestLaunchBoundsParallelism runs a wave of five clusters with at most two
// pipelines at once: the first two wait for each other, so the bound is
// reached, and no more than two ever run together.
func TestLaunchBoundsParallelism(t *testing.T) {
	repo := functiontest.NewRepo(t)
	names := []string{"a", "b", "c", "d", "e"}
	newRollout(t, repo, func(r *rollout.Rollout) {
		r.Waves = []rollout.Wave{{Name: "all"}}
		for _, n := range names {
			r.Waves[0].Clusters = append(r.Waves[0].Clusters, rollout.Cluster{Name: n, Phase: rollout.ClusterPending})
		}
	})
	var (
		mu       sync.Mutex
		running  int
		most     int
		bothIn   = make(chan struct{})
		released bool
	)
	exec := &functiontest.FakeExecutor{Func: func(ctx context.Context, _ string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		mu.Lock()
		running++
		most = max(most, running)
		if running == 2 && !released {
			released = true
			close(bothIn)
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			running--
			mu.Unlock()
		}()
		select {
		case <-bothIn:
		case <-ctx.Done():
			return tasks.ApplyCanaryResult{}, ctx.Err()
		}
		return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	evs, err := newFunction(repo, exec, fakeStatus{}, 2).Handle(ctx, waveStarted(t, 0, names...))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if len(evs) != len(names) {
		t.Errorf("emitted %d events, want %d", len(evs), len(names))
	}
	if most != 2 {
		t.Errorf("at most %d pipelines ran at once, want 2", most)
	}
}

func TestLaunchErrors(t *testing.T) {
	bad := waveStarted(t, 0, "c1")
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`{"wave": "one"}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cfg       *config.Config
		e         cloudevents.Event
		permanent bool
	}{
		{"payload does not decode", &config.Config{Applications: []config.Application{app()}}, bad, true},
		{"application no longer configured", &config.Config{}, waveStarted(t, 0, "c1"), true},
		{"cluster not in the rollout", &config.Config{Applications: []config.Application{app()}}, waveStarted(t, 0, "c9"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, nil)
			exec := newExecutor()
			evs, err := launch.New(tt.cfg, repo, exec, fakeStatus{}, hooks, 0).Handle(t.Context(), tt.e)
			if err == nil {
				t.Fatalf("Handle = %v, want an error", evs)
			}
			if got := events.IsPermanent(err); got != tt.permanent {
				t.Errorf("error %q: permanent = %v, want %v", err, got, tt.permanent)
			}
			if calls := exec.Applied(); len(calls) != 0 {
				t.Errorf("pipelines run: %v", calls)
			}
		})
	}
}

func TestLaunchContract(t *testing.T) {
	fn := launch.New(&config.Config{}, nil, nil, nil, nil, 0)
	if fn.Name() != "launch" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeWaveStarted}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// newExecutor is an executor that applies everywhere, reporting oldImage as the
// image the workload ran before.
func newExecutor() *functiontest.FakeExecutor {
	return &functiontest.FakeExecutor{Result: tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}}
}

// BenchmarkLaunchWave launches one wave of n clusters with an executor that
// answers at once: what launch itself costs, the rollout's bookkeeping
// included.
func BenchmarkLaunchWave(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			names := make([]string, n)
			clusters := make([]rollout.Cluster, n)
			for i := range names {
				names[i] = fmt.Sprintf("c%04d", i)
				clusters[i] = rollout.Cluster{Name: names[i], Phase: rollout.ClusterPending}
			}
			exec := &functiontest.FakeExecutor{Result: tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}}
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				repo := functiontest.NewRepo(b)
				ro := rollout.Rollout{
					ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: digest, Phase: rollout.Progressing,
					Waves: []rollout.Wave{{Name: "all", Clusters: slices.Clone(clusters)}},
				}
				if _, err := repo.Create(b.Context(), ro); err != nil {
					b.Fatal(err)
				}
				f := newFunction(repo, exec, fakeStatus{}, 0)
				e, err := events.New("ws", events.Source, events.TypeWaveStarted, events.WaveStarted{RolloutID: rolloutID, Wave: 0, Clusters: names})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				evs, err := f.Handle(b.Context(), e)
				if err != nil || len(evs) != n {
					b.Fatalf("Handle = %d events, %v", len(evs), err)
				}
			}
		})
	}
}

// The clusters of a wave finish at different times; every one is recorded
// in the rollout (several per update) before launch returns their events.
func TestLaunchRecordsEveryClusterOfALargeWave(t *testing.T) {
	repo := functiontest.NewRepo(t)
	const n = 40
	names := make([]string, n)
	clusters := make([]rollout.Cluster, n)
	for i := range names {
		names[i] = fmt.Sprintf("c%02d", i)
		clusters[i] = rollout.Cluster{Name: names[i], Phase: rollout.ClusterPending}
	}
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: digest, Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all", Clusters: clusters}},
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	exec := &functiontest.FakeExecutor{Func: func(_ context.Context, cl string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		var i int
		_, _ = fmt.Sscanf(cl, "c%d", &i)
		time.Sleep(time.Duration(i%7) * time.Millisecond)
		return tasks.ApplyCanaryResult{PreviousImage: image + "@sha256:" + cl, Changed: true}, nil
	}}
	e, err := events.New("ws", events.Source, events.TypeWaveStarted, events.WaveStarted{RolloutID: rolloutID, Wave: 0, Clusters: names})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := newFunction(repo, exec, fakeStatus{}, 0).Handle(t.Context(), e)
	if err != nil || len(evs) != n {
		t.Fatalf("Handle = %d events, %v; want %d", len(evs), err, n)
	}
	got, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got.Waves[0].Clusters {
		if c.Phase != rollout.ClusterProgressing || c.Applied.IsZero() || c.PreviousImage != image+"@sha256:"+c.Name {
			t.Errorf("cluster %s recorded as %s, applied %v, previous %q", c.Name, c.Phase, c.Applied, c.PreviousImage)
		}
	}
}
