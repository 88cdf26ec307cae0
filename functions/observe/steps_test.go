package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

var now = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// applying stores a progressing rollout whose c1 waits for step 1 of an
// apply: its run in flight (run true) or done.
func applying(t *testing.T, repo *embedded.Repo, phase rollout.Phase, run bool) {
	t.Helper()
	c := rollout.Cluster{Name: "c1", Phase: rollout.ClusterApplying, Step: 1, Deadline: now}
	if run {
		c.Run = events.PurposeApply
	} else {
		c.Phase, c.PreviousImage = rollout.ClusterProgressing, prev
	}
	ro := rollout.Rollout{
		ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: "sha256:new", Phase: phase,
		Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{c}}},
	}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
}

func engineEvent(t *testing.T, id, typ string, payload any) cloudevents.Event {
	t.Helper()
	e, err := events.New(id, events.Source, typ, payload)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

func finishedEvent(t *testing.T, f events.PipelineRunFinished) cloudevents.Event {
	t.Helper()
	f.RolloutID, f.Cluster, f.Purpose = rolloutID, "c1", events.PurposeApply
	return engineEvent(t, "fin", events.TypePipelineRunFinished, f)
}

func unreadable() fakeStatus {
	return fakeStatus{canaryStatus: func(context.Context, string, string, config.Workload) (rollout.CanaryStatus, error) {
		return rollout.CanaryStatus{}, errors.New("connection refused")
	}}
}

func TestObserveFinished(t *testing.T) {
	settled := func(primary string) fakeStatus {
		return status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: primary, TargetImage: primary})
	}
	tests := []struct {
		name      string
		phase     rollout.Phase
		run       events.PipelineRunFinished
		status    fakeStatus
		want      []result
		wantPhase rollout.ClusterPhase
		wantPrev  string
	}{
		{
			name:   "applied",
			run:    events.PipelineRunFinished{Step: 1, PreviousImage: prev, Changed: true},
			status: unreadable(), // not even read
			want:   []result{{"fin/" + events.TypeClusterApplied + "/c1", events.TypeClusterApplied, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"}}},
			// Flagger's turn now.
			wantPhase: rollout.ClusterProgressing, wantPrev: prev,
		},
		{
			name:      "unchanged, the primary already runs the digest",
			run:       events.PipelineRunFinished{Step: 1, PreviousImage: prev},
			status:    settled(ref),
			want:      []result{{"fin/" + events.TypeClusterSucceeded + "/c1", events.TypeClusterSucceeded, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1", Reason: "already running " + ref}}},
			wantPhase: rollout.ClusterProgressing, wantPrev: prev,
		},
		{
			name:      "unchanged, the primary still on the old image",
			run:       events.PipelineRunFinished{Step: 1, PreviousImage: prev},
			status:    settled(prev),
			want:      []result{{"fin/" + events.TypeClusterApplied + "/c1", events.TypeClusterApplied, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"}}},
			wantPhase: rollout.ClusterProgressing, wantPrev: prev,
		},
		{
			name:      "unchanged, the status unreadable",
			run:       events.PipelineRunFinished{Step: 1, PreviousImage: prev},
			status:    unreadable(),
			want:      []result{{"fin/" + events.TypeClusterApplied + "/c1", events.TypeClusterApplied, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"}}},
			wantPhase: rollout.ClusterProgressing, wantPrev: prev,
		},
		{
			name:      "the run failed",
			run:       events.PipelineRunFinished{Step: 1, Error: "pipeline failed: deployment web/shop-api not found"},
			status:    unreadable(),
			want:      []result{{"fin/" + events.TypeClusterFailed + "/c1", events.TypeClusterFailed, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1", Reason: "pipeline failed: deployment web/shop-api not found"}}},
			wantPhase: rollout.ClusterApplying,
		},
		{
			name:      "an earlier step's answer",
			run:       events.PipelineRunFinished{Step: 0, PreviousImage: prev, Changed: true},
			status:    unreadable(),
			wantPhase: rollout.ClusterApplying,
		},
		{
			name:   "applied after the rollout failed: rollback hears of it",
			phase:  rollout.Failed,
			run:    events.PipelineRunFinished{Step: 1, PreviousImage: prev, Changed: true},
			status: unreadable(),
			want:   []result{{"fin/" + events.TypeClusterApplied + "/c1", events.TypeClusterApplied, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1"}}},
			// Took the digest: to revert.
			wantPhase: rollout.ClusterProgressing, wantPrev: prev,
		},
		{
			name:      "failed after the rollout failed",
			phase:     rollout.Failed,
			run:       events.PipelineRunFinished{Step: 1, Error: "pipeline not done by its deadline"},
			status:    unreadable(),
			want:      []result{{"fin/" + events.TypeClusterApplied + "/c1", events.TypeClusterApplied, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1", Reason: "pipeline not done by its deadline"}}},
			wantPhase: rollout.ClusterFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			applying(t, repo, cmpOr(tt.phase, rollout.Progressing), true)
			evs, err := observe.New(cfg, repo, tt.status, func() time.Time { return now }).Handle(t.Context(), finishedEvent(t, tt.run))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, results(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			c, _, _ := ro.Cluster("c1")
			if c.Phase != tt.wantPhase || c.PreviousImage != tt.wantPrev {
				t.Errorf("c1: phase %s, previous %q; want %s, %q", c.Phase, c.PreviousImage, tt.wantPhase, tt.wantPrev)
			}
			if tt.run.Step == 1 && c.Run != "" {
				t.Errorf("c1: run %q after its end", c.Run)
			}
		})
	}
}

func cmpOr(p, def rollout.Phase) rollout.Phase {
	if p == "" {
		return def
	}
	return p
}

func TestObserveDeadline(t *testing.T) {
	failed := func(reason string) []result {
		return []result{{"dl/" + events.TypeClusterFailed + "/c1", events.TypeClusterFailed, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1",
			Reason: "no result by its deadline (2026-11-24T12:00:00Z): " + reason}}}
	}
	tests := []struct {
		name      string
		run       bool // the apply run is still in flight
		extension int
		seen      rollout.CanaryStatus // what the last look found
		status    fakeStatus
		want      []result
		extended  bool
	}{
		{
			name: "succeeded", status: status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref}),
			want: []result{{"dl/" + events.TypeClusterSucceeded + "/c1", events.TypeClusterSucceeded, rolloutID, events.ClusterResult{RolloutID: rolloutID, Cluster: "c1",
				Reason: "the primary runs " + ref + " (read at the deadline)"}}},
		},
		{
			name: "unreadable", status: unreadable(),
			want: failed("the cluster cannot be read: connection refused"),
		},
		{
			name: "the run hangs", run: true, status: status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: prev, TargetImage: prev}),
			want: failed("its pipeline run is still not done"),
		},
		{
			name: "Flagger failed", status: status(rollout.CanaryStatus{Phase: "Failed", PrimaryImage: prev, TargetImage: ref}),
			want: failed("Flagger's analysis failed"),
		},
		{
			name: "progressing", status: status(rollout.CanaryStatus{Phase: "Progressing", Weight: 20, PrimaryImage: prev, TargetImage: ref}),
			seen: rollout.CanaryStatus{Phase: "Progressing", Weight: 10}, extended: true,
		},
		{
			name: "Flagger never took up the revision", status: status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: prev, TargetImage: ref}),
			want: failed(`Flagger has not taken up the new revision (phase "Succeeded")`),
		},
		{
			name: "the workload runs another image", status: status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: prev, TargetImage: prev}),
			want: failed("the workload runs " + prev + ", not " + ref),
		},
		{
			name: "progressing, out of extensions", extension: rollout.MaxExtensions,
			status: status(rollout.CanaryStatus{Phase: "Progressing", Weight: 20, PrimaryImage: prev, TargetImage: ref}),
			seen:   rollout.CanaryStatus{Phase: "Progressing", Weight: 10},
			want:   failed("still Progressing at weight 20 after 3 more deadlines"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			applying(t, repo, rollout.Progressing, tt.run)
			if _, err := repo.Update(t.Context(), rolloutID, func(r *rollout.Rollout) error {
				r.Waves[0].Clusters[0].CanaryPhase, r.Waves[0].Clusters[0].CanaryWeight = tt.seen.Phase, tt.seen.Weight
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			e := engineEvent(t, "dl", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Extension: tt.extension})
			evs, err := observe.New(cfg, repo, tt.status, func() time.Time { return now }).Handle(t.Context(), e)
			if err != nil {
				t.Fatal(err)
			}
			if tt.extended {
				if len(evs) != 1 || evs[0].Type() != events.TypeClusterDeadline {
					t.Fatalf("emitted %v, want another deadline", evs)
				}
				if due, ok := events.Due(evs[0]); !ok || !due.After(now) {
					t.Errorf("the next deadline is due %v, %v", due, ok)
				}
				return
			}
			if diff := cmp.Diff(tt.want, results(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
		})
	}
}

// A deadline of a step that ended, or of a rollout no longer progressing,
// reads nothing and says nothing.
func TestObserveStaleDeadline(t *testing.T) {
	for _, step := range []int{0, 2} {
		repo := functiontest.NewRepo(t)
		applying(t, repo, rollout.Progressing, true)
		e := engineEvent(t, "dl", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: step})
		evs, err := observe.New(cfg, repo, fakeStatus{}, nil).Handle(t.Context(), e)
		if err != nil || len(evs) != 0 {
			t.Errorf("step %d: Handle = %v, %v; want nothing", step, evs, err)
		}
	}
}

func TestObserveFunctionFailed(t *testing.T) {
	repo := functiontest.NewRepo(t)
	applying(t, repo, rollout.Progressing, true)
	req := engineEvent(t, "req", events.TypePipelineRunRequested, events.PipelineRunRequested{
		RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Image: ref,
	})
	req.SetSubject("c1")
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	ff := engineEvent(t, "ff", events.TypeFunctionFailed, events.FunctionFailed{
		Function: "pipeline", EventID: "req", EventType: events.TypePipelineRunRequested, Error: "boom", Permanent: true, Event: raw, Subject: "c1",
	})
	f := observe.New(cfg, repo, fakeStatus{}, func() time.Time { return now })
	for range 2 { // a redelivery records nothing twice
		evs, err := f.Handle(t.Context(), ff)
		if err != nil {
			t.Fatal(err)
		}
		// The request given up on is answered as a failed run, under the
		// id the runner's own answer would have had.
		if len(evs) != 1 || evs[0].ID() != "req/"+events.TypePipelineRunFinished || evs[0].Subject() != "c1" {
			t.Fatalf("emitted %v", evs)
		}
		fin, err := events.Decode[events.PipelineRunFinished](evs[0])
		if err != nil {
			t.Fatal(err)
		}
		want := events.PipelineRunFinished{RolloutID: rolloutID, Cluster: "c1", Purpose: events.PurposeApply, Step: 1, Image: ref, Error: "the pipeline gave up: boom"}
		if diff := cmp.Diff(want, fin); diff != "" {
			t.Errorf("finished (-want +got):\n%s", diff)
		}
	}
	ro, err := repo.Get(t.Context(), rolloutID)
	if err != nil {
		t.Fatal(err)
	}
	want := []rollout.Failure{{Function: "pipeline", EventID: "req", EventType: events.TypePipelineRunRequested, Cluster: "c1", Error: "boom", At: now}}
	if diff := cmp.Diff(want, ro.Failures, cmpopts.IgnoreFields(rollout.Failure{}, "Event")); diff != "" {
		t.Errorf("failures (-want +got):\n%s", diff)
	}
}

// cachedStatus has a watch cache in front of its live reads.
type cachedStatus struct {
	fakeStatus
	cached rollout.CanaryStatus
	ok     bool
	live   int
}

func (c *cachedStatus) CachedCanaryStatus(string, string, config.Workload) (rollout.CanaryStatus, bool) {
	return c.cached, c.ok
}

func (c *cachedStatus) CanaryStatus(ctx context.Context, cl, ns string, w config.Workload) (rollout.CanaryStatus, error) {
	c.live++
	return c.fakeStatus.CanaryStatus(ctx, cl, ns, w)
}

// A canary event is handled from the watch cache when the cache shows
// what the event says; when it does not yet (or is not synced), from a live
// read. A revert is judged from a live read only: a cache left behind
// shows the state before the rollout, which is what a revert waits for.
func TestObserveReadsTheCacheFirst(t *testing.T) {
	succeeded := rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref}
	stale := rollout.CanaryStatus{Phase: "Promoting", PrimaryImage: prev, TargetImage: ref}
	before := rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: prev, TargetImage: prev}
	reverting := rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: ref, TargetImage: prev}
	tests := []struct {
		name      string
		phase     rollout.ClusterPhase
		cached    rollout.CanaryStatus
		ok        bool
		live      rollout.CanaryStatus
		outcome   events.CanaryOutcome
		wantLive  int
		wantTypes []string
	}{
		{"the cache shows the success", rollout.ClusterProgressing, succeeded, true, succeeded, events.CanarySucceeded, 0, []string{events.TypeClusterSucceeded}},
		{"the cache is behind", rollout.ClusterProgressing, stale, true, succeeded, events.CanarySucceeded, 1, []string{events.TypeClusterSucceeded}},
		{"the cache is not synced", rollout.ClusterProgressing, rollout.CanaryStatus{}, false, succeeded, events.CanarySucceeded, 1, []string{events.TypeClusterSucceeded}},
		{"progress is recorded from the cache", rollout.ClusterProgressing, stale, true, succeeded, events.CanaryProgressing, 0, nil},
		{"a revert done is read live", rollout.ClusterReverting, before, true, before, events.CanarySucceeded, 1, []string{events.TypeClusterReverted}},
		{"a stale cache showing the state before the rollout does not revert", rollout.ClusterReverting, before, true, reverting, events.CanarySucceeded, 1, nil},
		{"nor does a progress event", rollout.ClusterReverting, before, true, reverting, events.CanaryProgressing, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, tt.phase)
			st := &cachedStatus{fakeStatus: status(tt.live), cached: tt.cached, ok: tt.ok}
			evs, err := observe.New(cfg, repo, st, nil).Handle(t.Context(),
				canaryEvent(t, events.Canary{Cluster: "c1", Outcome: tt.outcome, RolloutID: rolloutID}))
			if err != nil {
				t.Fatal(err)
			}
			var types []string
			for _, e := range evs {
				types = append(types, e.Type())
			}
			if diff := cmp.Diff(tt.wantTypes, types); diff != "" || st.live != tt.wantLive {
				t.Errorf("emitted (-want +got):\n%s; %d live reads, want %d", diff, st.live, tt.wantLive)
			}
		})
	}
}
