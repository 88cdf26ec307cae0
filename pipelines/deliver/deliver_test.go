package deliver_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/deliver"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	ref       = image + "@sha256:new"
	oldImage  = image + "@sha256:old"
)

// fakeExecutor stands in for the pipeline executor (the features run the
// real ones against real clusters) and records every ApplyCanary.
type fakeExecutor struct {
	answer func(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error)

	mu    sync.Mutex
	calls map[string][]tasks.ApplyCanaryParams
}

func (f *fakeExecutor) Run(ctx context.Context, cluster string, rp pipelines.RunParams) (pipelines.Results, error) {
	if rp.GitOps != nil {
		return pipelines.Results{}, errors.New("no GitOps in these tests")
	}
	p := tasks.ApplyCanaryParams{
		Rollout: rp.Rollout, Namespace: rp.Namespace, Kind: rp.Kind, Workload: rp.Workload, Container: rp.Container,
		Image: rp.Image, Canary: rp.Canary, Objects: rp.Objects,
	}
	res, err := f.applyCanary(ctx, cluster, p)
	return pipelines.Results{PreviousImage: res.PreviousImage, Changed: res.Changed}, err
}

func (f *fakeExecutor) applyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string][]tasks.ApplyCanaryParams{}
	}
	f.calls[cluster] = append(f.calls[cluster], p)
	f.mu.Unlock()
	if f.answer == nil {
		return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
	}
	return f.answer(ctx, cluster, p)
}

func (f *fakeExecutor) applied() map[string][]tasks.ApplyCanaryParams {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
			// Something for the canary to refer to, which is applied too.
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

func newRunner(exec *fakeExecutor, a config.Application) *deliver.Runner {
	return deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{a}}, exec, hooks), answered, 0, nil)
}

func requestEvent(t *testing.T, r events.PipelineRunRequested) cloudevents.Event {
	t.Helper()
	if r.RolloutID == "" {
		r.RolloutID, r.Application, r.Cluster, r.Step = rolloutID, "shop", "c1", 1
	}
	if r.Deadline.IsZero() {
		r.Deadline = time.Now().Add(time.Hour)
	}
	e, err := events.New("req", events.Source, events.TypePipelineRunRequested, r)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func finishedOf(t *testing.T, evs []cloudevents.Event) events.PipelineRunFinished {
	t.Helper()
	if len(evs) != 1 || evs[0].Type() != events.TypePipelineRunFinished || evs[0].ID() != "req/"+events.TypePipelineRunFinished ||
		evs[0].Subject() != "c1" || events.RolloutID(evs[0]) != rolloutID {
		t.Fatalf("emitted %v, want one pipelinerun.finished for c1", evs)
	}
	f, err := events.Decode[events.PipelineRunFinished](evs[0])
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// An apply runs the rollout pipeline with the canary rendered for the
// cluster, reporting to flotilla's hook, analysis on; a revert gives the
// previous image back with the analysis skipped.
func TestRunnerAppliesWhatTheRequestAsks(t *testing.T) {
	for _, purpose := range []string{events.PurposeApply, events.PurposeRevert} {
		t.Run(purpose, func(t *testing.T) {
			exec := &fakeExecutor{}
			img := ref
			if purpose == events.PurposeRevert {
				img = oldImage
			}
			evs, err := newRunner(exec, app()).Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: purpose, Image: img}))
			if err != nil {
				t.Fatal(err)
			}
			want := events.PipelineRunFinished{RolloutID: rolloutID, Cluster: "c1", Purpose: purpose, Step: 1, Image: img, PreviousImage: oldImage, Changed: true}
			if diff := cmp.Diff(want, finishedOf(t, evs)); diff != "" {
				t.Errorf("finished (-want +got):\n%s", diff)
			}
			revert := purpose == events.PurposeRevert
			objs := canary.Render(app(), canary.Input{Cluster: "c1", Rollout: rolloutID, Event: hooks("c1", rolloutID), SkipAnalysis: revert})
			deps, err := objs.Dependencies()
			if err != nil {
				t.Fatal(err)
			}
			if len(deps) != 1 || deps[0].GetKind() != "HorizontalPodAutoscaler" {
				t.Fatalf("dependencies of the canary = %v, want the autoscaler", deps)
			}
			id := rolloutID
			if revert {
				id += "-revert"
			}
			wantParams := map[string][]tasks.ApplyCanaryParams{"c1": {{
				Rollout: id, Namespace: "web", Kind: "Deployment", Workload: "shop-api", Container: "api", Image: img,
				Canary: objs.Canary, Objects: deps,
			}}}
			if diff := cmp.Diff(wantParams, exec.applied()); diff != "" {
				t.Errorf("pipelines run (-want +got):\n%s", diff)
			}
			c := exec.applied()["c1"][0].Canary
			hs := c.Spec.Analysis.Webhooks
			last := hs[len(hs)-1]
			if last.Type != flaggerv1.EventHook || last.URL != "http://flotilla.test/hooks/flagger/s3cret" {
				t.Errorf("last webhook = %+v, want flotilla's event hook", last)
			}
			if diff := cmp.Diff(map[string]string{"cluster": "c1", "rollout": rolloutID}, *last.Metadata); diff != "" {
				t.Errorf("event hook metadata (-want +got):\n%s", diff)
			}
			if c.Spec.SkipAnalysis != revert {
				t.Errorf("skipAnalysis = %v for a %s", c.Spec.SkipAnalysis, purpose)
			}
		})
	}
}

func TestRunnerDaemonSet(t *testing.T) {
	ds := app()
	ds.Workload = config.Workload{Kind: config.KindDaemonSet, Name: "shop-agent"}
	ds.Delivery.Autoscale = nil
	exec := &fakeExecutor{}
	if _, err := newRunner(exec, ds).Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref})); err != nil {
		t.Fatal(err)
	}
	calls := exec.applied()["c1"]
	if len(calls) != 1 || calls[0].Kind != config.KindDaemonSet || calls[0].Workload != "shop-agent" {
		t.Errorf("ApplyCanary calls = %+v, want one for DaemonSet shop-agent", calls)
	}
}

func TestRunnerFailures(t *testing.T) {
	errFlaky := errors.New("connection refused")
	flaky := func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		return tasks.ApplyCanaryResult{}, errFlaky
	}
	tests := []struct {
		name      string
		answer    func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error)
		deadline  time.Time
		noApp     bool
		wantErr   bool   // retried by the dispatcher
		wantError string // reported in the finished event
		wantCalls int
	}{
		{
			name: "permanent failure",
			answer: func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
				return tasks.ApplyCanaryResult{}, fault.Permanent(errors.New("deployment web/shop-api not found"))
			},
			wantError: "pipeline failed: deployment web/shop-api not found", wantCalls: 1,
		},
		{name: "retryable failure before the deadline", answer: flaky, wantErr: true, wantCalls: 1},
		{
			name: "a run that outlives its deadline",
			answer: func(ctx context.Context, _ string, _ tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
				<-ctx.Done()
				return tasks.ApplyCanaryResult{}, ctx.Err()
			},
			deadline:  time.Now().Add(50 * time.Millisecond),
			wantError: "pipeline not done by its deadline", wantCalls: 1,
		},
		{name: "requested past its deadline", answer: flaky, deadline: time.Now().Add(-time.Second), wantError: "the run was not done by its deadline"},
		{name: "application no longer configured", noApp: true, wantError: `pipeline failed: application "shop" is no longer configured`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exec := &fakeExecutor{answer: tt.answer}
			a := app()
			if tt.noApp {
				a.Name = "other"
			}
			evs, err := newRunner(exec, a).Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref, Deadline: tt.deadline}))
			if tt.wantErr {
				if err == nil || fault.IsPermanent(err) || !errors.Is(err, errFlaky) || len(evs) != 0 {
					t.Fatalf("Handle = %v, %v; want the executor's retryable error", evs, err)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if got := finishedOf(t, evs).Error; len(got) < len(tt.wantError) || got[:len(tt.wantError)] != tt.wantError {
					t.Errorf("error %q, want it to start with %q", got, tt.wantError)
				}
			}
			if n := len(exec.applied()["c1"]); n != tt.wantCalls {
				t.Errorf("%d runs, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestRunnerContract(t *testing.T) {
	r := deliver.NewRunner(nil, nil, 0, nil)
	if r.Name() != "pipeline" {
		t.Errorf("Name = %q", r.Name())
	}
	if diff := cmp.Diff([]string{events.TypePipelineRunRequested, events.TypePruneRequested}, r.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
	if l := r.Lane(); l.Name != "pipelines" || l.Workers != deliver.DefaultRunners {
		t.Errorf("Lane = %+v", l)
	}
}

// answers is the journal's view of the answers the runner gave.
type answers map[string]bool

func (a answers) Has(_ context.Context, id string) (bool, error) { return a[id], nil }

var answered = answers{}

// A request handed over again (dispatch is at least once) whose answer is
// journaled is not run again: no cluster is applied twice for one step.
func TestRunnerRunsARequestOnce(t *testing.T) {
	exec := &fakeExecutor{}
	journal := answers{"req/" + events.TypePipelineRunFinished: true}
	r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{app()}}, exec, hooks), journal, 0, nil)
	evs, err := r.Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref}))
	if err != nil || len(evs) != 0 {
		t.Fatalf("Handle = %v, %v; want nothing", evs, err)
	}
	if n := len(exec.applied()); n != 0 {
		t.Errorf("ran %d pipelines for a request answered already", n)
	}
}

// A run taken up is journaled as started, once per request however often
// it is attempted, before its answer is returned.
func TestRunnerAnnouncesStarts(t *testing.T) {
	j, err := store.Open(filepath.Join(t.TempDir(), "journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = j.Close() })
	var attempts int
	exec := &fakeExecutor{answer: func(context.Context, string, tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		attempts++
		if attempts == 1 {
			return tasks.ApplyCanaryResult{}, errors.New("the API server is away") // retried
		}
		return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
	}}
	r := newRunner(exec, app()).AnnounceStarts(j)
	req := requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref, Wave: 1})
	if _, err := r.Handle(t.Context(), req); err == nil {
		t.Fatal("the first attempt succeeded; want a retryable failure")
	}
	evs, err := r.Handle(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	finishedOf(t, evs)
	recs, err := j.Read(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []events.PipelineRunStart
	for _, rec := range recs {
		if rec.Event.Type() != events.TypePipelineRunStarted || rec.Event.Subject() != "c1" || events.RolloutID(rec.Event) != rolloutID {
			t.Errorf("journaled %s (subject %q, rollout %q), want a pipelinerun.started of c1", rec.Event.Type(), rec.Event.Subject(), events.RolloutID(rec.Event))
			continue
		}
		p, err := events.Decode[events.PipelineRunStart](rec.Event)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	want := []events.PipelineRunStart{{RolloutID: rolloutID, Wave: 1, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Image: ref}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
}

// hungStarts is a journal whose appends hang until their context ends.
type hungStarts struct{}

func (hungStarts) Append(ctx context.Context, _ ...cloudevents.Event) ([]bus.Record, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// A run whose start cannot be journaled (the bus hangs) while its replica
// stops (the partition handed over: the dispatcher's context canceled)
// returns at once, its answer not journaled, instead of waiting out the
// start's minute: a replica giving a partition up waits for its runs
// before it releases the lease, and renews none of its other leases
// meanwhile.
func TestRunnerStopsWithoutItsStart(t *testing.T) {
	exec := &fakeExecutor{}
	r := newRunner(exec, app()).AnnounceStarts(hungStarts{})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	evs, err := r.Handle(ctx, requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref, Wave: 1}))
	if !errors.Is(err, context.Canceled) || len(evs) != 0 {
		t.Errorf("Handle = %v, %v; want nothing and the context's error (the request replayed)", evs, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Handle returned %s after its context ended; want at once", took)
	}
}

// runs records the params of every run.
type runs struct{ got []pipelines.RunParams }

func (r *runs) Run(_ context.Context, _ string, p pipelines.RunParams) (pipelines.Results, error) {
	r.got = append(r.got, p)
	return pipelines.Results{PreviousImage: oldImage, Changed: true}, nil
}

// A GitOps application's run bumps its repository first, with the
// version's tag next to the digest and the cluster's paths.
func TestRunnerGitOps(t *testing.T) {
	a := app()
	a.GitOps = &config.GitOps{URL: "file:///repo", Branch: "main", Paths: []string{"clusters/{cluster}/app.yaml"}}
	exec := &runs{}
	r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{a}}, exec, hooks), nil, 0, nil)
	if _, err := r.Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref, Tag: "1.2.3"})); err != nil {
		t.Fatal(err)
	}
	if len(exec.got) != 1 || exec.got[0].GitOps == nil {
		t.Fatalf("runs = %+v, want one with GitOps", exec.got)
	}
	g := exec.got[0].GitOps
	if g.Image != image+":1.2.3@sha256:new" || g.URL != "file:///repo" || len(g.Paths) != 1 || g.Paths[0] != "clusters/c1/app.yaml" || exec.got[0].Application != "shop" {
		t.Errorf("GitOps params = %+v (application %q)", g, exec.got[0].Application)
	}
}

// rolloutsIn answers every rollout in one phase.
type rolloutsIn rollout.Phase

func (p rolloutsIn) Phase(context.Context, string) (rollout.Phase, error) {
	return rollout.Phase(p), nil
}

// A request of a rollout that has ended (superseded by a newer version) is
// not run; one of a rollout in flight is.
func TestRunnerSkipsEndedRollouts(t *testing.T) {
	for phase, want := range map[rollout.Phase]int{rollout.Superseded: 0, rollout.Progressing: 1, rollout.Failed: 1} {
		t.Run(string(phase), func(t *testing.T) {
			exec := &fakeExecutor{}
			r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{app()}}, exec, hooks), nil, 0, nil).
				SkipEnded(rolloutsIn(phase))
			if _, err := r.Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: events.PurposeApply, Image: ref})); err != nil {
				t.Fatal(err)
			}
			if n := len(exec.applied()); n != want {
				t.Errorf("ran %d pipelines, want %d", n, want)
			}
		})
	}
}

// In mode pullRequest the merge writes the repository: an apply run only
// applies; a revert run bumps the repository only with revert: commit.
func TestRunnerPullRequestMode(t *testing.T) {
	for _, tt := range []struct {
		revert              string
		applyBumps, revBump bool
	}{{"pullRequest", false, false}, {"commit", false, true}} {
		t.Run("revert "+tt.revert, func(t *testing.T) {
			a := app()
			a.GitOps = &config.GitOps{URL: "file:///repo", Branch: "main", Paths: []string{"clusters/{cluster}/app.yaml"},
				Mode: config.GitOpsModePullRequest, PullRequest: &config.PullRequest{Host: "gitea", Revert: tt.revert}}
			exec := &runs{}
			r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{a}}, exec, hooks), nil, 0, nil)
			for _, purpose := range []string{events.PurposeApply, events.PurposeRevert} {
				if _, err := r.Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{Purpose: purpose, Image: ref, Tag: "1.2.3"})); err != nil {
					t.Fatal(err)
				}
			}
			if len(exec.got) != 2 || (exec.got[0].GitOps != nil) != tt.applyBumps || (exec.got[1].GitOps != nil) != tt.revBump {
				t.Errorf("runs bump the repository: apply %v, revert %v; want %v, %v", exec.got[0].GitOps != nil, exec.got[1].GitOps != nil, tt.applyBumps, tt.revBump)
			}
		})
	}
}

// phases is a rollout reader whose rollouts' phases a test changes.
type phases struct {
	mu sync.Mutex
	of map[string]rollout.Phase
}

func (p *phases) set(id string, ph rollout.Phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.of[id] = ph
}

func (p *phases) Phase(_ context.Context, id string) (rollout.Phase, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.of[id], nil
}

// One run at a time writes an application's workload in a cluster: a newer
// rollout's run waits for a superseded one's in flight (else the last to
// write would win), and a superseded rollout's run that waited behind a
// newer one's writes nothing.
func TestRunnerOneRunPerWorkload(t *testing.T) {
	ro := &phases{of: map[string]rollout.Phase{"old": rollout.Progressing, "new": rollout.Progressing}}
	var (
		mu       sync.Mutex
		inFlight int
		overlap  bool
		order    []string
	)
	entered := make(chan string, 4)
	release := map[string]chan struct{}{"old": make(chan struct{}), "new": make(chan struct{})}
	exec := &fakeExecutor{answer: func(ctx context.Context, _ string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
		mu.Lock()
		inFlight++
		overlap = overlap || inFlight > 1
		order = append(order, p.Rollout)
		mu.Unlock()
		entered <- p.Rollout
		<-release[p.Rollout]
		mu.Lock()
		inFlight--
		mu.Unlock()
		return tasks.ApplyCanaryResult{PreviousImage: oldImage, Changed: true}, nil
	}}
	r := deliver.NewRunner(deliver.New(&config.Config{Applications: []config.Application{app()}}, exec, hooks), nil, 0, nil).SkipEnded(ro)
	handle := func(id string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := r.Handle(t.Context(), requestEvent(t, events.PipelineRunRequested{
				RolloutID: id, Application: "shop", Cluster: "c1", Step: 1, Purpose: events.PurposeApply, Image: ref,
			}))
			done <- err
		}()
		return done
	}

	// The superseded rollout's run is in flight; the newer one's waits.
	oldDone := handle("old")
	if got := <-entered; got != "old" {
		t.Fatalf("first run %q, want old", got)
	}
	ro.set("old", rollout.Superseded)
	newDone := handle("new")
	time.Sleep(100 * time.Millisecond) // room for a run that does not wait to overlap
	close(release["old"])
	if err := <-oldDone; err != nil {
		t.Fatal(err)
	}
	if got := <-entered; got != "new" {
		t.Fatalf("second run %q, want new", got)
	}

	// A request of the superseded rollout arriving now waits, then is
	// skipped: the newer rollout's write stands.
	again := handle("old")
	close(release["new"])
	if err := <-newDone; err != nil {
		t.Fatal(err)
	}
	if err := <-again; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"old", "new"}, order); diff != "" || overlap {
		t.Errorf("runs (-want +got):\n%s; overlapping: %v", diff, overlap)
	}
}
