package advance_test

import (
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

const rolloutID = "shop-1"

// state is the part of a rollout advance changes.
type state struct {
	Phase    rollout.Phase
	Reason   string
	Wave     int
	Clusters map[string]rollout.ClusterPhase
	// Parallel and Budget are wave 2's maxParallel and maxFailures.
	Parallel, Budget int
	// StopsBefore is the signature-requiring wave an unsigned rollout
	// does not reach.
	StopsBefore string
}

// newRollout stores a rollout of two waves, c1 then c2 and c3, in state st.
func newRollout(t *testing.T, repo *embedded.Repo, st state) {
	t.Helper()
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: "registry.test/team/shop", Tag: "1.3.0", Digest: "sha256:new",
		Phase: st.Phase, Reason: st.Reason, Wave: st.Wave, StopsBefore: st.StopsBefore,
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1"}}},
			{Name: "rest", Clusters: []rollout.Cluster{{Name: "c2"}, {Name: "c3"}}, MaxParallel: st.Parallel, MaxFailures: st.Budget},
		},
	}
	for w := range ro.Waves {
		for c := range ro.Waves[w].Clusters {
			ro.Waves[w].Clusters[c].Phase = st.Clusters[ro.Waves[w].Clusters[c].Name]
		}
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatalf("creating rollout: %v", err)
	}
}

func stateOf(ro rollout.Rollout) state {
	st := state{Phase: ro.Phase, Reason: ro.Reason, Wave: ro.Wave, Clusters: map[string]rollout.ClusterPhase{},
		Parallel: ro.Waves[1].MaxParallel, Budget: ro.Waves[1].MaxFailures, StopsBefore: ro.StopsBefore}
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			st.Clusters[c.Name] = c.Phase
		}
	}
	return st
}

func clusterResult(t *testing.T, typ, cluster, reason string) cloudevents.Event {
	t.Helper()
	wave := map[string]int{"c1": 0, "c2": 1, "c3": 1, "c9": 0}[cluster]
	e, err := events.New("in", events.Source, typ, events.ClusterResult{RolloutID: rolloutID, Wave: wave, Cluster: cluster, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func ev(typ string, data any) functiontest.Emitted {
	return functiontest.Emitted{ID: "in/" + typ + "/" + rolloutID, Type: typ, RolloutID: rolloutID, Data: data}
}

func TestAdvance(t *testing.T) {
	const (
		pending     = rollout.ClusterPending
		progressing = rollout.ClusterProgressing
		succeeded   = rollout.ClusterSucceeded
		failed      = rollout.ClusterFailed
	)
	cs := func(c1, c2, c3 rollout.ClusterPhase) map[string]rollout.ClusterPhase {
		return map[string]rollout.ClusterPhase{"c1": c1, "c2": c2, "c3": c3}
	}
	tests := []struct {
		name     string
		before   state
		typ      string
		cluster  string
		reason   string
		want     []functiontest.Emitted
		after    state
		deployed bool
	}{
		{
			name:   "first wave done: next wave starts",
			before: state{Phase: rollout.Progressing, Clusters: cs(progressing, pending, pending)},
			typ:    events.TypeClusterSucceeded, cluster: "c1",
			want: []functiontest.Emitted{
				ev(events.TypeWaveSucceeded, events.WaveResult{RolloutID: rolloutID, Wave: 0}),
				ev(events.TypeWaveStarted, events.WaveStarted{RolloutID: rolloutID, Wave: 1, Clusters: []string{"c2", "c3"}}),
			},
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, pending, pending)},
		},
		{
			name:   "wave still running",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, progressing)},
			typ:    events.TypeClusterSucceeded, cluster: "c2",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, succeeded, progressing)},
		},
		{
			name:   "last wave done: rollout succeeded",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, succeeded, progressing)},
			typ:    events.TypeClusterSucceeded, cluster: "c3",
			want: []functiontest.Emitted{
				ev(events.TypeWaveSucceeded, events.WaveResult{RolloutID: rolloutID, Wave: 1}),
				ev(events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: rolloutID}),
			},
			after:    state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, succeeded, succeeded)},
			deployed: true,
		},
		{
			name:   "a failure fails the rollout at once",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, progressing)},
			typ:    events.TypeClusterFailed, cluster: "c2", reason: "canary analysis failed",
			want: []functiontest.Emitted{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID,
				Reason: "wave 2 (rest): cluster c2 failed: canary analysis failed"})},
			after: state{Phase: rollout.Failed, Wave: 1, Clusters: cs(succeeded, failed, progressing),
				Reason: "wave 2 (rest): cluster c2 failed: canary analysis failed"},
		},
		{
			name:   "a failure in the first wave",
			before: state{Phase: rollout.Progressing, Clusters: cs(progressing, pending, pending)},
			typ:    events.TypeClusterFailed, cluster: "c1", reason: "pipeline failed: boom",
			want: []functiontest.Emitted{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID,
				Reason: "wave 1 (canary): cluster c1 failed: pipeline failed: boom"})},
			after: state{Phase: rollout.Failed, Clusters: cs(failed, pending, pending),
				Reason: "wave 1 (canary): cluster c1 failed: pipeline failed: boom"},
		},
		{
			name:   "a failure within the wave's budget",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, progressing), Budget: 1},
			typ:    events.TypeClusterFailed, cluster: "c2", reason: "canary analysis failed",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, failed, progressing), Budget: 1},
		},
		{
			name:   "an unsigned build's last wave done: succeeded, and not what the fleet runs",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, succeeded, progressing), StopsBefore: "prod"},
			typ:    events.TypeClusterSucceeded, cluster: "c3",
			want: []functiontest.Emitted{
				ev(events.TypeWaveSucceeded, events.WaveResult{RolloutID: rolloutID, Wave: 1}),
				ev(events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: rolloutID}),
			},
			after: state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, succeeded, succeeded), StopsBefore: "prod"},
		},
		{
			name:   "the wave ends within its budget: the rollout succeeds, naming the failure",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, failed, progressing), Budget: 1},
			typ:    events.TypeClusterSucceeded, cluster: "c3",
			want: []functiontest.Emitted{
				ev(events.TypeWaveSucceeded, events.WaveResult{RolloutID: rolloutID, Wave: 1}),
				ev(events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: rolloutID}),
			},
			after: state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, failed, succeeded), Budget: 1,
				Reason: "wave 2 (rest) within its failure budget of 1: cluster c2 failed: "},
			deployed: true,
		},
		{
			name:   "a failure beyond the budget fails the rollout",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, failed, progressing), Budget: 1},
			typ:    events.TypeClusterFailed, cluster: "c3", reason: "boom",
			want: []functiontest.Emitted{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID,
				Reason: "wave 2 (rest): cluster c2 failed: ; cluster c3 failed: boom (more than its failure budget of 1)"})},
			after: state{Phase: rollout.Failed, Wave: 1, Clusters: cs(succeeded, failed, failed), Budget: 1,
				Reason: "wave 2 (rest): cluster c2 failed: ; cluster c3 failed: boom (more than its failure budget of 1)"},
		},
		{
			name:   "one at a time: a cluster done, the next one starts",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, pending), Parallel: 1},
			typ:    events.TypeClusterSucceeded, cluster: "c2",
			want:  []functiontest.Emitted{ev(events.TypeWaveContinued, events.WaveStarted{RolloutID: rolloutID, Wave: 1, Clusters: []string{"c3"}})},
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, succeeded, pending), Parallel: 1},
		},
		{
			name:   "duplicate result after the wave moved on",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, progressing)},
			typ:    events.TypeClusterSucceeded, cluster: "c1",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, progressing)},
		},
		{
			// A redelivery after a crash between the transition and the
			// application update repeats the (idempotent) update.
			name:   "duplicate of the last result",
			before: state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, succeeded, succeeded)},
			typ:    events.TypeClusterSucceeded, cluster: "c3",
			after:    state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, succeeded, succeeded)},
			deployed: true,
		},
		{
			name:   "a retried cluster of a wave that passed succeeds while the current wave runs",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(progressing, progressing, pending)},
			typ:    events.TypeClusterSucceeded, cluster: "c1",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(succeeded, progressing, pending)},
		},
		{
			name:   "a retried cluster of a wave that passed fails again: the wave stays passed",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(progressing, progressing, progressing)},
			typ:    events.TypeClusterFailed, cluster: "c1", reason: "again",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(failed, progressing, progressing)},
		},
		{
			name:   "the last wave is done while a retry is under way: the rollout waits for it",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(progressing, succeeded, progressing)},
			typ:    events.TypeClusterSucceeded, cluster: "c3",
			after: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(progressing, succeeded, succeeded)},
		},
		{
			name:   "the retry's end ends the rollout",
			before: state{Phase: rollout.Progressing, Wave: 1, Clusters: cs(progressing, succeeded, succeeded)},
			typ:    events.TypeClusterSucceeded, cluster: "c1",
			want: []functiontest.Emitted{
				ev(events.TypeWaveSucceeded, events.WaveResult{RolloutID: rolloutID, Wave: 1}),
				ev(events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: rolloutID}),
			},
			after:    state{Phase: rollout.Succeeded, Wave: 1, Clusters: cs(succeeded, succeeded, succeeded)},
			deployed: true,
		},
		{
			name:   "result after the rollout failed",
			before: state{Phase: rollout.Failed, Wave: 1, Clusters: cs(succeeded, failed, progressing), Reason: "earlier"},
			typ:    events.TypeClusterFailed, cluster: "c3", reason: "late",
			after: state{Phase: rollout.Failed, Wave: 1, Clusters: cs(succeeded, failed, progressing), Reason: "earlier"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tt.before)
			evs, err := advance.New(&config.Config{}, repo, nil).Handle(ctx, clusterResult(t, tt.typ, tt.cluster, tt.reason))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
			ro, err := repo.Get(ctx, rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.after, stateOf(ro)); diff != "" {
				t.Errorf("rollout after (-want +got):\n%s", diff)
			}
			app, err := repo.App(ctx, "shop")
			if err != nil {
				t.Fatal(err)
			}
			want := rollout.AppState{Name: "shop"}
			if tt.deployed {
				want.DeployedTag, want.DeployedDigest = "1.3.0", "sha256:new"
				// the rollout that deployed it, when it succeeded
				want.DeployedRollout, want.DeployedAt = rolloutID, ro.Updated
				want.DeployedClusters = []string{"c1", "c2", "c3"} // every cluster of its waves, the failed one too
			}
			if diff := cmp.Diff(want, app); diff != "" {
				t.Errorf("application state (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdvanceWholeRollout feeds a rollout its cluster results one by one, as
// the runtime would, including a redelivery.
func TestAdvanceWholeRollout(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
	fn := advance.New(&config.Config{}, repo, nil)
	steps := []struct {
		cluster string
		want    []string
	}{
		{"c1", []string{events.TypeWaveSucceeded, events.TypeWaveStarted}},
		{"c1", nil}, // redelivered
		{"c3", nil},
		{"c2", []string{events.TypeWaveSucceeded, events.TypeRolloutSucceeded}},
		{"c2", nil}, // redelivered
	}
	for i, s := range steps {
		evs, err := fn.Handle(ctx, clusterResult(t, events.TypeClusterSucceeded, s.cluster, ""))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Type())
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (%s) functiontest.Emitted (-want +got):\n%s", i, s.cluster, diff)
		}
	}
	ro, err := repo.Get(ctx, rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	if ro.Phase != rollout.Succeeded {
		t.Errorf("phase = %s, want Succeeded", ro.Phase)
	}
}

func TestAdvanceTwoFailures(t *testing.T) {
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Wave: 1, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterProgressing, "c3": rollout.ClusterProgressing}})
	// The reason names every failed cluster of the wave.
	if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
		r.Waves[1].Clusters[0].Phase, r.Waves[1].Clusters[0].Message = rollout.ClusterFailed, "first"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := advance.New(&config.Config{}, repo, nil).Handle(t.Context(), clusterResult(t, events.TypeClusterFailed, "c3", "second"))
	if err != nil {
		t.Fatal(err)
	}
	want := []functiontest.Emitted{ev(events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID,
		Reason: "wave 2 (rest): cluster c2 failed: first; cluster c3 failed: second"})}
	if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
}

func TestAdvanceErrors(t *testing.T) {
	bad := clusterResult(t, events.TypeClusterSucceeded, "c1", "")
	if err := bad.SetData(cloudevents.ApplicationJSON, []byte(`{"wave": "x"}`)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		e    cloudevents.Event
	}{
		{"payload does not decode", bad},
		{"cluster not in the rollout", clusterResult(t, events.TypeClusterSucceeded, "c9", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, state{Phase: rollout.Progressing})
			evs, err := advance.New(&config.Config{}, repo, nil).Handle(t.Context(), tt.e)
			if err == nil || !fault.IsPermanent(err) {
				t.Errorf("Handle = %v, %v; want a permanent error", evs, err)
			}
		})
	}
}

func TestAdvanceContract(t *testing.T) {
	fn := advance.New(&config.Config{}, nil, nil)
	if fn.Name() != "advance" {
		t.Errorf("Name = %q", fn.Name())
	}
	if diff := cmp.Diff([]string{events.TypeClusterSucceeded, events.TypeClusterFailed, events.TypeWaveBaked,
		events.TypeRolloutPauseRequested, events.TypeRolloutResumeRequested, events.TypeRolloutAbortRequested,
		events.TypeFleetStopRequested, events.TypeFleetStartRequested, events.TypeWaveApprovalRequested,
		events.TypeRolloutOverrideRequested, events.TypeClustersRemoved}, fn.Consumes()); diff != "" {
		t.Errorf("Consumes (-want +got):\n%s", diff)
	}
}

func summarize(t *testing.T, evs []cloudevents.Event) []functiontest.Emitted {
	t.Helper()
	return functiontest.Summarize(t, evs, events.TypeWaveSucceeded, events.TypeWaveStarted, events.TypeWaveContinued, events.TypeRolloutSucceeded, events.TypeRolloutFailed)
}

// A wave with a bake time waits, once its clusters are done, for a timer
// at the end of the bake; a failure during the bake fails the wave, the end
// of the bake moves the rollout on (once).
func TestAdvanceBake(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	until := now.Add(time.Minute)
	setup := func(t *testing.T) (*embedded.Repo, *advance.Function, []cloudevents.Event) {
		t.Helper()
		repo := functiontest.NewRepo(t)
		newRollout(t, repo, state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{
			"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
		if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
			r.Waves[0].BakeTime = time.Minute
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		fn := advance.New(&config.Config{}, repo, func() time.Time { return now })
		evs, err := fn.Handle(t.Context(), clusterResult(t, events.TypeClusterSucceeded, "c1", ""))
		if err != nil {
			t.Fatal(err)
		}
		return repo, fn, evs
	}
	baked := func(t *testing.T, evs []cloudevents.Event) cloudevents.Event {
		t.Helper()
		if len(evs) != 1 || evs[0].Type() != events.TypeWaveBaked {
			t.Fatalf("emitted %v, want the bake's timer only", evs)
		}
		if due, ok := events.Due(evs[0]); !ok || !due.Equal(until) {
			t.Errorf("the bake's timer is due %v, want %v", due, until)
		}
		return evs[0]
	}

	t.Run("the bake ends healthy: the next wave starts, once", func(t *testing.T) {
		repo, fn, evs := setup(t)
		timer := baked(t, evs)
		ro, _ := repo.Get(t.Context(), rolloutID)
		if !ro.Waves[0].BakingUntil.Equal(until) || !ro.Baking(0) {
			t.Errorf("wave 1 baking until %v (baking %v), want %v", ro.Waves[0].BakingUntil, ro.Baking(0), until)
		}
		evs, err := fn.Handle(t.Context(), timer)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{events.TypeWaveSucceeded, events.TypeWaveStarted}
		if diff := cmp.Diff(want, types(evs)); diff != "" {
			t.Errorf("at the bake's end (-want +got):\n%s", diff)
		}
		if evs, err := fn.Handle(t.Context(), timer); err != nil || len(evs) != 0 {
			t.Errorf("the timer again = %v, %v; want nothing", types(evs), err)
		}
	})
	t.Run("a failure during the bake fails the wave", func(t *testing.T) {
		repo, fn, evs := setup(t)
		timer := baked(t, evs)
		evs, err := fn.Handle(t.Context(), clusterResult(t, events.TypeClusterFailed, "c1", "failed during the wave's bake: gate"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{events.TypeRolloutFailed}, types(evs)); diff != "" {
			t.Errorf("a failure in the bake (-want +got):\n%s", diff)
		}
		ro, _ := repo.Get(t.Context(), rolloutID)
		if ro.Phase != rollout.Failed || !strings.Contains(ro.Reason, "bake") {
			t.Errorf("rollout %s: %q, want Failed naming the bake", ro.Phase, ro.Reason)
		}
		if evs, err := fn.Handle(t.Context(), timer); err != nil || len(evs) != 0 {
			t.Errorf("the timer after the failure = %v, %v; want nothing", types(evs), err)
		}
	})
}

func types(evs []cloudevents.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type())
	}
	return out
}

func control(t *testing.T, typ, id string) cloudevents.Event {
	t.Helper()
	e, err := events.New("ctl-"+typ, "/flotilla/api", typ, events.Control{RolloutID: id, User: "ann", Reason: "why not"})
	if err != nil {
		t.Fatal(err)
	}
	if id != "" {
		e.SetExtension(events.ExtRolloutID, id)
	}
	return e
}

// A paused rollout starts nothing, and says so: its wave ending is
// recorded and the next wave announced, its clusters held until the
// resume, which starts them; aborting fails it (its rollback reverts what
// it touched).
func TestAdvanceControls(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
	fn := advance.New(&config.Config{}, repo, nil)
	if evs, err := fn.Handle(ctx, control(t, events.TypeRolloutPauseRequested, rolloutID)); err != nil || len(evs) != 0 {
		t.Fatalf("pause = %v, %v", types(evs), err)
	}
	if ro, _ := repo.Get(ctx, rolloutID); ro.Waiting != "paused by ann: why not" {
		t.Errorf("paused: waiting %q, want the pause named", ro.Waiting)
	}
	evs, err := fn.Handle(ctx, clusterResult(t, events.TypeClusterSucceeded, "c1", ""))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeWaveSucceeded, events.TypeWaveStarted}, types(evs)); diff != "" {
		t.Errorf("wave 1 done while paused (-want +got):\n%s", diff)
	}
	ro, _ := repo.Get(ctx, rolloutID)
	if ro.Paused != "ann: why not" || ro.Wave != 1 || ro.Waiting != "paused by ann: why not" || ro.Waves[1].Clusters[0].Phase != rollout.ClusterPending {
		t.Errorf("paused %q at wave %d waiting %q, c2 %s; want ann's pause at wave 2, its clusters held", ro.Paused, ro.Wave+1, ro.Waiting, ro.Waves[1].Clusters[0].Phase)
	}
	evs, err = fn.Handle(ctx, control(t, events.TypeRolloutResumeRequested, rolloutID))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeWaveContinued}, types(evs)); diff != "" {
		t.Errorf("resume (-want +got):\n%s", diff)
	}
	if ro, _ := repo.Get(ctx, rolloutID); ro.Waiting != "" {
		t.Errorf("resumed: waiting %q", ro.Waiting)
	}
	evs, err = fn.Handle(ctx, control(t, events.TypeRolloutAbortRequested, rolloutID))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeRolloutFailed}, types(evs)); diff != "" {
		t.Errorf("abort (-want +got):\n%s", diff)
	}
	ro, _ = repo.Get(ctx, rolloutID)
	if ro.Phase != rollout.Failed || ro.Reason != "aborted by ann: why not" {
		t.Errorf("after the abort: %s %q", ro.Phase, ro.Reason)
	}
}

// Starting the line again starts the clusters every rollout in flight
// holds; stopping it records who stopped it.
func TestAdvanceFleetStopStart(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Wave: 1, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
	fn := advance.New(&config.Config{}, repo, nil)
	if evs, err := fn.Handle(ctx, control(t, events.TypeFleetStopRequested, "")); err != nil || len(evs) != 0 {
		t.Fatalf("stop = %v, %v", types(evs), err)
	}
	if st, _ := repo.Fleet(ctx); !st.Stopped || st.By != "ann" {
		t.Errorf("fleet after stop: %+v", st)
	}
	evs, err := fn.Handle(ctx, control(t, events.TypeFleetStartRequested, ""))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]functiontest.Emitted{{ID: "ctl-" + events.TypeFleetStartRequested + "/" + events.TypeWaveContinued + "/" + rolloutID,
		Type: events.TypeWaveContinued, RolloutID: rolloutID, Data: events.WaveStarted{RolloutID: rolloutID, Wave: 1, Clusters: []string{"c2", "c3"}}}},
		summarize(t, evs)); diff != "" {
		t.Errorf("start (-want +got):\n%s", diff)
	}
	if st, _ := repo.Fleet(ctx); st.Stopped {
		t.Errorf("fleet after start: %+v", st)
	}
}

// A cluster removed from the fleet leaves the rollouts in flight that have
// not finished with it, saying so: the wave it held back succeeds with
// the clusters that remain, and the rollout ends; the application's
// deployed version is the rollout's. A rollout without it is untouched.
func TestAdvanceClustersRemoved(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Wave: 1, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterSucceeded, "c3": rollout.ClusterProgressing}})
	other := rollout.Rollout{ID: "cart-1", Application: "cart", Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c4", Phase: rollout.ClusterProgressing}}}}}
	if _, err := repo.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	e, err := events.New("gone-1", "/flotilla/reload", events.TypeClustersRemoved, events.ClustersRemoved{Clusters: []string{"c3", "c9"}, Source: "file"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := advance.New(&config.Config{}, repo, nil).Handle(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeWaveSucceeded, events.TypeRolloutSucceeded}, types(evs)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		if id, _ := ev.Extensions()[events.ExtRolloutID].(string); id != rolloutID {
			t.Errorf("%s is of rollout %q, want %s", ev.Type(), id, rolloutID)
		}
	}
	ro, _ := repo.Get(ctx, rolloutID)
	c3, _, _ := ro.Cluster("c3")
	if ro.Phase != rollout.Succeeded || c3.Phase != rollout.ClusterRemoved || !strings.Contains(c3.Message, "removed from the fleet's configuration (file)") {
		t.Errorf("rollout %s, c3 %s %q; want succeeded, c3 removed and saying so", ro.Phase, c3.Phase, c3.Message)
	}
	if app, _ := repo.App(ctx, "shop"); app.DeployedDigest != "sha256:new" {
		t.Errorf("shop deployed %q, want the rollout's digest", app.DeployedDigest)
	}
	if ro, _ := repo.Get(ctx, "cart-1"); ro.Version != 1 || ro.Waves[0].Clusters[0].Phase != rollout.ClusterProgressing {
		t.Errorf("cart-1 changed: version %d, c4 %s", ro.Version, ro.Waves[0].Clusters[0].Phase)
	}
}

// A wave that needs two approvals starts once two distinct approvers have
// approved it; the same approver twice counts once.
func TestAdvanceWaveApprovals(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Wave: 1, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterSucceeded, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
	if _, err := repo.Update(ctx, rolloutID, func(r *rollout.Rollout) error { r.Waves[1].Approvals = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	fn := advance.New(&config.Config{}, repo, nil)
	approve := func(who string) []string {
		t.Helper()
		e, err := events.New("approval-"+who, "/flotilla/api", events.TypeWaveApprovalRequested,
			events.WaveApproval{RolloutID: rolloutID, Wave: 1, Approver: who, User: who})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := fn.Handle(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		return types(evs)
	}
	if got := approve("alice"); len(got) != 0 {
		t.Errorf("one approval = %v, want the wave still held", got)
	}
	if got := approve("alice"); len(got) != 0 {
		t.Errorf("alice again = %v, want nothing", got)
	}
	if diff := cmp.Diff([]string{events.TypeWaveContinued}, approve("bob")); diff != "" {
		t.Errorf("the second approver (-want +got):\n%s", diff)
	}
	ro, _ := repo.Get(ctx, rolloutID)
	if diff := cmp.Diff([]string{"alice", "bob"}, ro.Waves[1].Approvers); diff != "" {
		t.Errorf("approvers (-want +got):\n%s", diff)
	}
}

// Starting the next wave starts its clusters in the same transaction (no
// hop through launch), as far as the wave's policy lets them: the runs are
// derived from wave.started, as launch's would be; a wave that waits for an
// approval only says so.
func TestAdvanceStartsTheNextWave(t *testing.T) {
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	cfg := &config.Config{Applications: []config.Application{{Name: "shop", Image: "registry.test/team/shop", Namespace: "default",
		Workload: config.Workload{Kind: "Deployment", Name: "shop"}}}}
	for _, tt := range []struct {
		name        string
		change      func(*rollout.Rollout)
		want        []string // clusters whose apply is requested
		wantWaiting string
	}{
		{name: "every cluster", want: []string{"c2", "c3"}},
		{name: "within maxParallel", change: func(r *rollout.Rollout) { r.Waves[1].MaxParallel = 1 }, want: []string{"c2"}},
		{name: "held by an approval", change: func(r *rollout.Rollout) { r.Waves[1].Approvals = 1 },
			wantWaiting: "wave 2 (rest) waits for 1 approval, has none"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{
				"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
			if tt.change != nil {
				if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error { tt.change(r); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			evs, err := advance.New(cfg, repo, func() time.Time { return at }).Handle(t.Context(), clusterResult(t, events.TypeClusterSucceeded, "c1", ""))
			if err != nil {
				t.Fatal(err)
			}
			ws := "in/" + events.TypeWaveStarted + "/" + rolloutID
			var runs []string
			for _, e := range evs {
				if e.Type() != events.TypePipelineRunRequested {
					continue
				}
				req, err := events.Decode[events.PipelineRunRequested](e)
				if err != nil {
					t.Fatal(err)
				}
				if want := ws + "/" + events.TypePipelineRunRequested + "/" + req.Cluster + "/apply/1"; e.ID() != want || req.Wave != 1 {
					t.Errorf("run %s of wave %d; want %s", e.ID(), req.Wave+1, want)
				}
				runs = append(runs, req.Cluster)
			}
			if diff := cmp.Diff(tt.want, runs); diff != "" {
				t.Errorf("runs requested (-want +got):\n%s", diff)
			}
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			if ro.Wave != 1 || ro.Waiting != tt.wantWaiting {
				t.Errorf("wave %d, waiting %q; want wave 2, %q", ro.Wave+1, ro.Waiting, tt.wantWaiting)
			}
			for _, name := range tt.want {
				if c, _, _ := ro.Cluster(name); c.Phase != rollout.ClusterApplying || c.Step != 1 {
					t.Errorf("%s is %s at step %d, want applying at 1", name, c.Phase, c.Step)
				}
			}
		})
	}
}
