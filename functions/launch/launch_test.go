package launch_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
	digest    = "sha256:new"
	ref       = image + "@" + digest
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Track: config.TrackMinorVersion, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
		},
	}
}

// newRollout stores a rollout of ref over two waves: c1, then c2 and c3.
func newRollout(tb testing.TB, repo *embedded.Repo, change func(*rollout.Rollout)) {
	tb.Helper()
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
	if _, err := repo.Create(tb.Context(), ro); err != nil {
		tb.Fatalf("creating rollout: %v", err)
	}
}

func waveStarted(tb testing.TB, wave int, clusters ...string) cloudevents.Event {
	tb.Helper()
	e, err := events.New("ws", events.Source, events.TypeWaveStarted, events.WaveStarted{RolloutID: rolloutID, Wave: wave, Clusters: clusters})
	if err != nil {
		tb.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func newFunction(repo *embedded.Repo) *launch.Function {
	cfg := &config.Config{Applications: []config.Application{app()}}
	return launch.New(cfg, repo, func() time.Time { return now })
}

// emitted is what a test compares of an emitted event.
type emitted struct {
	ID, Type, Subject string
	Due               time.Time
	Data              any
}

func summarize(t *testing.T, evs []cloudevents.Event) []emitted {
	t.Helper()
	var got []emitted
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is invalid: %v", e.ID(), err)
		}
		if events.RolloutID(e) != rolloutID {
			t.Errorf("event %s: rollout %q", e.ID(), events.RolloutID(e))
		}
		data, err := events.DecodePayload(e)
		if err != nil {
			t.Fatal(err)
		}
		due, _ := events.Due(e)
		got = append(got, emitted{e.ID(), e.Type(), e.Subject(), due, data})
	}
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	return got
}

// The step's deadline: (2 iterations + 1 threshold + 3) x 1s + 1m + 2m.
var deadline = now.Add(3*time.Minute + 6*time.Second)

func request(wave int, cl string) []emitted {
	step := cl + "/apply/1"
	return []emitted{
		{"ws/" + events.TypeClusterDeadline + "/" + step, events.TypeClusterDeadline, cl, deadline,
			events.ClusterDeadline{RolloutID: rolloutID, Wave: wave, Cluster: cl, Purpose: events.PurposeApply, Step: 1}},
		{"ws/" + events.TypePipelineRunRequested + "/" + step, events.TypePipelineRunRequested, cl, time.Time{},
			events.PipelineRunRequested{RolloutID: rolloutID, Application: "shop", Wave: wave, Cluster: cl, Purpose: events.PurposeApply,
				Step: 1, Image: ref, Tag: "1.2.3", Deadline: deadline}},
	}
}

// launch waits for no cluster: it asks for a run per cluster and sets its
// deadline, in the transaction that marks the cluster Applying.
func TestLaunchRequestsARunPerCluster(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, func(r *rollout.Rollout) {
		r.Wave = 1
		r.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
	})
	f := newFunction(repo)
	evs, err := f.Handle(ctx, waveStarted(t, 1, "c2", "c3"))
	if err != nil {
		t.Fatalf("Handle: %v", err)
	}
	want := slices.Concat(request(1, "c2"), request(1, "c3"))
	sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
	if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	ro, err := repo.Get(ctx, rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"c2", "c3"} {
		c, _, _ := ro.Cluster(name)
		want := rollout.Cluster{Name: name, Phase: rollout.ClusterApplying, Step: 1, Run: events.PurposeApply, Deadline: deadline}
		if diff := cmp.Diff(want, *c); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if c, _, _ := ro.Cluster("c1"); c.Phase != rollout.ClusterSucceeded || c.Step != 0 {
		t.Errorf("c1 of an earlier wave changed: %+v", c)
	}

	// A redelivered wave asks for nothing twice.
	evs, err = f.Handle(ctx, waveStarted(t, 1, "c2", "c3"))
	if err != nil || len(evs) != 0 {
		t.Errorf("redelivered wave: %d events, %v; want none", len(evs), err)
	}
}

func TestLaunchNothingToDo(t *testing.T) {
	tests := []struct {
		name   string
		change func(*rollout.Rollout)
	}{
		{"rollout failed", func(r *rollout.Rollout) { r.Phase = rollout.Failed }},
		{"another wave runs", func(r *rollout.Rollout) { r.Wave = 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tt.change)
			evs, err := newFunction(repo).Handle(t.Context(), waveStarted(t, 0, "c1"))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %d events, %v; want none", len(evs), err)
			}
		})
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
			evs, err := launch.New(tt.cfg, repo, nil).Handle(t.Context(), tt.e)
			if err == nil {
				t.Fatalf("Handle = %v, want an error", evs)
			}
			if got := fault.IsPermanent(err); got != tt.permanent {
				t.Errorf("error %q: permanent = %v, want %v", err, got, tt.permanent)
			}
			// Nothing was requested: the clusters are still pending.
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			if c, _, _ := ro.Cluster("c1"); c.Phase != rollout.ClusterPending {
				t.Errorf("c1 is %s after a failed launch", c.Phase)
			}
		})
	}
}

func TestLaunchContract(t *testing.T) {
	fn := launch.New(&config.Config{}, nil, nil)
	if fn.Name() != "launch" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeWaveContinued, events.TypeRolloutRetryRequested, events.TypePullRequestStatus, events.TypeRolloutFailed}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

// BenchmarkLaunchWave launches one wave of n clusters: what launch itself
// costs, the rollout's bookkeeping included (the runs are the executors').
func BenchmarkLaunchWave(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			names := make([]string, n)
			clusters := make([]rollout.Cluster, n)
			for i := range names {
				names[i] = fmt.Sprintf("c%04d", i)
				clusters[i] = rollout.Cluster{Name: names[i], Phase: rollout.ClusterPending}
			}
			for b.Loop() {
				b.StopTimer()
				repo := functiontest.NewRepo(b)
				ro := rollout.Rollout{
					ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: digest, Phase: rollout.Progressing,
					Waves: []rollout.Wave{{Name: "all", Clusters: slices.Clone(clusters)}},
				}
				if _, err := repo.Create(b.Context(), ro); err != nil {
					b.Fatal(err)
				}
				f := newFunction(repo)
				e := waveStarted(b, 0, names...)
				b.StartTimer()
				evs, err := f.Handle(b.Context(), e)
				if err != nil || len(evs) != 2*n {
					b.Fatalf("Handle = %d events, %v", len(evs), err)
				}
			}
		})
	}
}

// A wave with maxParallel 1 starts one cluster; wave.continued starts the
// next only once there is room again.
func TestLaunchKeepsToMaxParallel(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, func(r *rollout.Rollout) {
		r.Wave = 1
		r.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
		r.Waves[1].MaxParallel = 1
	})
	f := newFunction(repo)
	evs, err := f.Handle(ctx, waveStarted(t, 1, "c2", "c3"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(request(1, "c2"), summarize(t, evs)); diff != "" {
		t.Errorf("wave started (-want +got):\n%s", diff)
	}
	continued := func() cloudevents.Event {
		e := waveStarted(t, 1, "c3")
		e.SetID("wc")
		e.SetType(events.TypeWaveContinued)
		return e
	}
	if evs, err := f.Handle(ctx, continued()); err != nil || len(evs) != 0 {
		t.Errorf("continued while c2 applies = %d events, %v; want none", len(evs), err)
	}
	if _, err := repo.Update(ctx, rolloutID, func(r *rollout.Rollout) error {
		r.Waves[1].Clusters[0].Phase = rollout.ClusterSucceeded
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err = f.Handle(ctx, continued())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Subject() != "c3" {
		t.Errorf("continued after c2 = %v; want c3's request and deadline", summarize(t, evs))
	}
}

// A paused rollout, or any rollout while the line is stopped, starts no
// cluster.
func TestLaunchHolds(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(*testing.T, *embedded.Repo)
	}{
		{"rollout paused", func(t *testing.T, repo *embedded.Repo) {
			t.Helper()
			if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error { r.Paused = "ann"; return nil }); err != nil {
				t.Fatal(err)
			}
		}},
		{"fleet stopped", func(t *testing.T, repo *embedded.Repo) {
			t.Helper()
			if err := repo.UpdateFleet(t.Context(), func(f *rollout.FleetState) error { f.Stopped = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, nil)
			tt.change(t, repo)
			evs, err := newFunction(repo).Handle(t.Context(), waveStarted(t, 0, "c1"))
			if err != nil || len(evs) != 0 {
				t.Errorf("Handle = %d events, %v; want none", len(evs), err)
			}
			ro, _ := repo.Get(t.Context(), rolloutID)
			if c, _, _ := ro.Cluster("c1"); c.Phase != rollout.ClusterPending {
				t.Errorf("c1 is %s, want Pending", c.Phase)
			}
		})
	}
}

// A wave waiting for approvals starts nothing and says so; approved, it
// starts.
func TestLaunchWaitsForApprovals(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, func(r *rollout.Rollout) { r.Waves[0].Approvals = 1 })
	f := newFunction(repo)
	if evs, err := f.Handle(ctx, waveStarted(t, 0, "c1")); err != nil || len(evs) != 0 {
		t.Fatalf("Handle = %d events, %v; want none", len(evs), err)
	}
	ro, _ := repo.Get(ctx, rolloutID)
	if want := "wave 1 (canary) waits for 1 approval, has none"; ro.Waiting != want {
		t.Errorf("waiting %q, want %q", ro.Waiting, want)
	}
	if _, err := repo.Update(ctx, rolloutID, func(r *rollout.Rollout) error { r.Waves[0].Approvers = []string{"alice"}; return nil }); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Handle(ctx, waveStarted(t, 0, "c1"))
	if err != nil || len(evs) != 2 {
		t.Fatalf("approved: %d events, %v; want c1's request and deadline", len(evs), err)
	}
	if ro, _ := repo.Get(ctx, rolloutID); ro.Waiting != "" {
		t.Errorf("still waiting %q", ro.Waiting)
	}
}

// A wave inside a freeze window waits, saying until when, with a timer at
// the window's end; overridden, it starts.
func TestLaunchFreezeWindow(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, nil)
	cfg := &config.Config{Applications: []config.Application{app()}, Fleet: config.Fleet{FreezeWindows: []config.FreezeWindow{
		{Name: "black-friday", Schedule: "0 0 * * *", Duration: config.Duration{Duration: 24 * time.Hour}},
	}}}
	f := launch.New(cfg, repo, func() time.Time { return now })
	evs, err := f.Handle(ctx, waveStarted(t, 0, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	if len(evs) != 1 || evs[0].Type() != events.TypeWaveContinued {
		t.Fatalf("in the window: %v, want the window's end timer", summarize(t, evs))
	}
	if due, ok := events.Due(evs[0]); !ok || !due.Equal(end) {
		t.Errorf("timer due %v, want %v", due, end)
	}
	ro, _ := repo.Get(ctx, rolloutID)
	if want := `freeze window "black-friday" until 2026-11-25T00:00:00Z`; ro.Waiting != want {
		t.Errorf("waiting %q, want %q", ro.Waiting, want)
	}
	if _, err := repo.Update(ctx, rolloutID, func(r *rollout.Rollout) error { r.Waves[0].FreezeOverride = "ann: hotfix"; return nil }); err != nil {
		t.Fatal(err)
	}
	if evs, err := f.Handle(ctx, waveStarted(t, 0, "c1")); err != nil || len(evs) != 2 {
		t.Errorf("overridden: %d events, %v; want c1's request and deadline", len(evs), err)
	}
}

func retryRequested(tb testing.TB, cluster string, attempt int) cloudevents.Event {
	tb.Helper()
	e, err := events.New("retry", events.Source, events.TypeRolloutRetryRequested,
		events.RolloutRetryRequested{RolloutID: rolloutID, Cluster: cluster, Attempt: attempt, User: "ops"})
	if err != nil {
		tb.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

// A user's retry starts a failed cluster again, its apply carrying a
// restart token (Flagger analyses the same image anew): in a wave that has
// passed at once, in the current wave as its parallelism allows, a bake
// starting again once it is done; held like any start.
func TestLaunchRetry(t *testing.T) {
	failed := func(w, c int) func(*rollout.Rollout) {
		return func(r *rollout.Rollout) {
			r.Waves[w].Clusters[c].Phase, r.Waves[w].Clusters[c].Step = rollout.ClusterFailed, 1
		}
	}
	inWave2 := func(r *rollout.Rollout) { // the first wave passed, the second runs
		r.Wave = 1
		for w, phase := range []rollout.ClusterPhase{rollout.ClusterSucceeded, rollout.ClusterProgressing} {
			for i := range r.Waves[w].Clusters {
				if c := &r.Waves[w].Clusters[i]; c.Phase == rollout.ClusterPending {
					c.Phase = phase
				}
			}
		}
	}
	tests := []struct {
		name        string
		change      []func(*rollout.Rollout)
		cluster     string
		wantRun     []string // clusters whose apply is requested
		wantPhase   map[string]rollout.ClusterPhase
		wantWaiting string
		wantBake    bool // the current wave's bake is still on
	}{
		{
			name: "a cluster of a wave that passed", change: []func(*rollout.Rollout){failed(0, 0), inWave2},
			wantRun: []string{"c1"}, wantPhase: map[string]rollout.ClusterPhase{"c1": rollout.ClusterApplying, "c2": rollout.ClusterProgressing},
		},
		{
			name: "a cluster of the current wave, no room", cluster: "c3",
			change:    []func(*rollout.Rollout){failed(1, 1), inWave2, func(r *rollout.Rollout) { r.Waves[1].MaxParallel = 1 }},
			wantPhase: map[string]rollout.ClusterPhase{"c3": rollout.ClusterPending},
		},
		{
			name: "a cluster of a baking wave", cluster: "c3",
			change: []func(*rollout.Rollout){failed(1, 1), inWave2, func(r *rollout.Rollout) {
				r.Waves[1].Clusters[0].Phase = rollout.ClusterSucceeded
				r.Waves[1].BakeTime, r.Waves[1].BakingUntil = time.Minute, now.Add(time.Minute)
			}},
			wantRun: []string{"c3"}, wantPhase: map[string]rollout.ClusterPhase{"c3": rollout.ClusterApplying},
		},
		{
			name:    "a cluster of a wave that passed, while the current wave waits for its approval",
			change:  []func(*rollout.Rollout){failed(0, 0), func(r *rollout.Rollout) { r.Wave, r.Waves[1].Approvals = 1, 1 }},
			wantRun: []string{"c1"}, wantPhase: map[string]rollout.ClusterPhase{"c1": rollout.ClusterApplying, "c2": rollout.ClusterPending},
			wantWaiting: "wave 2 (rest) waits for 1 approval, has none",
		},
		{
			name: "paused", change: []func(*rollout.Rollout){failed(0, 0), inWave2, func(r *rollout.Rollout) { r.Paused = "ops" }},
			wantPhase: map[string]rollout.ClusterPhase{"c1": rollout.ClusterPending}, wantWaiting: "paused by ops",
		},
		{
			name: "another cluster named", cluster: "c2", change: []func(*rollout.Rollout){failed(0, 0), inWave2},
			wantPhase: map[string]rollout.ClusterPhase{"c1": rollout.ClusterFailed},
		},
		{
			name: "nothing failed", change: []func(*rollout.Rollout){inWave2},
			wantPhase: map[string]rollout.ClusterPhase{"c1": rollout.ClusterSucceeded},
		},
		{
			name: "a wave not started", change: []func(*rollout.Rollout){failed(1, 1)},
			wantPhase: map[string]rollout.ClusterPhase{"c3": rollout.ClusterFailed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, func(r *rollout.Rollout) {
				for _, c := range tt.change {
					c(r)
				}
			})
			evs, err := newFunction(repo).Handle(ctx, retryRequested(t, tt.cluster, 1))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var runs []string
			for _, e := range evs {
				if e.Type() != events.TypePipelineRunRequested {
					continue
				}
				req, err := events.Decode[events.PipelineRunRequested](e)
				if err != nil {
					t.Fatal(err)
				}
				if req.Restart != rolloutID+"/1" || req.Step != 2 {
					t.Errorf("request %+v: want restart %s/1 at step 2", req, rolloutID)
				}
				runs = append(runs, req.Cluster)
			}
			if diff := cmp.Diff(tt.wantRun, runs); diff != "" {
				t.Errorf("runs requested (-want +got):\n%s", diff)
			}
			ro, err := repo.Get(ctx, rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range tt.wantPhase {
				if c, _, _ := ro.Cluster(name); c.Phase != want {
					t.Errorf("%s is %s, want %s", name, c.Phase, want)
				}
			}
			if ro.Waiting != tt.wantWaiting {
				t.Errorf("waiting %q, want %q", ro.Waiting, tt.wantWaiting)
			}
			if baking := !ro.Waves[ro.Wave].BakingUntil.IsZero(); baking != tt.wantBake {
				t.Errorf("bake on: %v, want %v", baking, tt.wantBake)
			}
		})
	}
}
