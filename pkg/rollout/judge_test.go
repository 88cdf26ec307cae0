package rollout_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

const (
	newRef = "registry.test/team/app@sha256:abc"
	oldRef = "registry.test/team/app@sha256:old"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name     string
		phase    rollout.ClusterPhase
		baking   bool
		outcome  events.CanaryOutcome
		status   rollout.CanaryStatus
		wantType string
	}{
		{"promoted: the primary runs the digest", rollout.ClusterProgressing, false, events.CanarySucceeded,
			rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: newRef, TargetImage: newRef}, events.TypeClusterSucceeded},
		{"Flagger says succeeded, the primary runs the old image", rollout.ClusterProgressing, false, events.CanarySucceeded,
			rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: newRef}, ""},
		{"failed with the digest in the canary", rollout.ClusterProgressing, false, events.CanaryFailed,
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: oldRef, TargetImage: newRef}, events.TypeClusterFailed},
		{"a failure of another revision", rollout.ClusterProgressing, false, events.CanaryFailed,
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: oldRef, TargetImage: oldRef}, ""},
		{"failed during the bake", rollout.ClusterSucceeded, true, events.CanaryFailed,
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: newRef}, events.TypeClusterFailed},
		{"failed after the wave passed", rollout.ClusterSucceeded, false, events.CanaryFailed,
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: newRef}, ""},
		{"reverted: both run the previous image, settled", rollout.ClusterReverting, false, events.CanarySucceeded,
			rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: oldRef}, events.TypeClusterReverted},
		{"reverting: the analysis is under way", rollout.ClusterReverting, false, events.CanarySucceeded,
			rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: oldRef, TargetImage: oldRef}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", tt.phase, oldRef)})
			r.Phase = rollout.Progressing
			if tt.baking {
				r.Waves[0].BakingUntil = t0
			}
			got, _ := r.Classify(&r.Waves[0].Clusters[0], events.Canary{Cluster: "c1", Outcome: tt.outcome}, tt.status)
			if got != tt.wantType {
				t.Errorf("Classify = %q, want %q", got, tt.wantType)
			}
			if decisive := r.Decisive(events.Canary{Cluster: "c1", Outcome: tt.outcome}, tt.status); decisive != (tt.wantType != "" && tt.phase != rollout.ClusterReverting) {
				t.Errorf("Decisive = %v", decisive)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		name       string
		run        string
		status     rollout.CanaryStatus
		readErr    error
		wantType   string
		wantReason string
	}{
		{name: "promoted", status: rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: newRef, TargetImage: newRef},
			wantType: events.TypeClusterSucceeded, wantReason: "the primary runs " + newRef + " (read at the deadline)"},
		{name: "unreadable", readErr: errors.New("connection refused"),
			wantType: events.TypeClusterFailed, wantReason: "the cluster cannot be read: connection refused"},
		{name: "Flagger failed", status: rollout.CanaryStatus{Phase: "Failed", PrimaryImage: oldRef, TargetImage: newRef},
			wantType: events.TypeClusterFailed, wantReason: "Flagger's analysis failed"},
		{name: "the run hangs", run: events.PurposeApply, status: rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: oldRef},
			wantType: events.TypeClusterFailed, wantReason: "its pipeline run is still not done"},
		{name: "the workload runs another image", status: rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: oldRef},
			wantType: events.TypeClusterFailed, wantReason: "the workload runs " + oldRef + ", not " + newRef},
		{name: "analysis under way", status: rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: oldRef, TargetImage: newRef}},
		{name: "never taken up", status: rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: newRef},
			wantType: events.TypeClusterFailed, wantReason: `Flagger has not taken up the new revision (phase "Succeeded")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, oldRef)})
			r.Waves[0].Clusters[0].Run = tt.run
			typ, reason := r.Judge(&r.Waves[0].Clusters[0], tt.status, tt.readErr)
			if typ != tt.wantType || reason != tt.wantReason {
				t.Errorf("Judge = %q, %q; want %q, %q", typ, reason, tt.wantType, tt.wantReason)
			}
		})
	}
}

// A revision applied while Flagger initialized the canary is one Flagger
// never sees: the cluster applies it again, with a restart token, and says
// why; a canary that initialized before the apply is left to Flagger.
func TestCanaryNudgesAMissedRevision(t *testing.T) {
	missed := rollout.CanaryStatus{Phase: "Initialized", PrimaryImage: oldRef, TargetImage: newRef, Transition: t0.Add(2 * time.Second)}
	tests := []struct {
		name   string
		status rollout.CanaryStatus
		nudges int
		want   []string
	}{
		{"initialized after the apply: applied again", missed, 0,
			[]string{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:10:00"}},
		{"initialized in the second of the apply (Flagger's time has whole seconds): applied again",
			rollout.CanaryStatus{Phase: "Initialized", PrimaryImage: oldRef, TargetImage: newRef, Transition: t0.Truncate(time.Second)}, 0,
			[]string{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:10:00"}},
		{"initialized before the apply: Flagger will see it", rollout.CanaryStatus{Phase: "Initialized", PrimaryImage: oldRef, TargetImage: newRef, Transition: t0.Add(-time.Second)}, 0, nil},
		{"progressing: Flagger saw it", rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: oldRef, TargetImage: newRef, Transition: t0.Add(2 * time.Second)}, 0, nil},
		{"nudged enough: the deadline decides", missed, rollout.MaxNudges, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, oldRef)})
			r.ID, r.Phase = "app-1", rollout.Progressing
			c := &r.Waves[0].Clusters[0]
			c.Applied, c.Nudges, c.Step = t0.Add(284*time.Millisecond), tt.nudges, 1
			out, err := r.Canary(cause(t), events.Canary{Cluster: "c1", Outcome: events.CanaryInitialized}, tt.status, t0.Add(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, types(out)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if tt.want == nil {
				return
			}
			req, err := events.Decode[events.PipelineRunRequested](out[0])
			if err != nil {
				t.Fatal(err)
			}
			if c.Phase != rollout.ClusterApplying || c.Step != 2 || req.Restart != "app-1/0/nudge/1" || req.Image != newRef {
				t.Errorf("cluster %s step %d, request %+v", c.Phase, c.Step, req)
			}
		})
	}
}

// A release set's run that failed at a member (those before it applied)
// leaves the cluster to be reverted to the commit the fleet ran before; an
// application's failed run reports nothing applied, nothing to revert.
// Catches: a set's cluster failed at its api left on the api's new commit
// by the rollback (no previous revision recorded).
func TestAppliedFailedRunOfASet(t *testing.T) {
	for _, tt := range []struct {
		name    string
		members []string
		want    string
	}{
		{"a release set", []string{"migrate", "api"}, "git.example.com/deployments@old"},
		{"an application", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := rollout.Rollout{ID: "shop-1", Application: "shop", Image: "git.example.com/deployments", Digest: "new", PreviousDigest: "old",
				Phase: rollout.Progressing, Members: tt.members,
				Waves: []rollout.Wave{{Name: "w1", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterApplying, Run: events.PurposeApply, Step: 1}}}}}
			cause, err := events.New("run-1", "test", events.TypePipelineRunFinished, events.PipelineRunFinished{RolloutID: "shop-1", Cluster: "c1", Step: 1})
			if err != nil {
				t.Fatal(err)
			}
			evs, err := r.Applied(cause, events.PipelineRunFinished{RolloutID: "shop-1", Cluster: "c1", Step: 1, Purpose: events.PurposeApply, Error: "api: canary api failed"}, false, time.Now())
			if err != nil || len(evs) != 1 || evs[0].Type() != events.TypeClusterFailed {
				t.Fatalf("Applied = %v, %v; want one cluster.failed", evs, err)
			}
			cl, _, _ := r.Cluster("c1")
			if cl.PreviousImage != tt.want {
				t.Errorf("PreviousImage = %q, want %q", cl.PreviousImage, tt.want)
			}
		})
	}
}

// A release set's cluster is reverted once its revert run ended (its Jobs
// run after its canaries are back), not on the canaries' news alone.
// Catches: a set rolled back while its migration Job still runs the
// failed commit.
func TestClassifySetRevertWaitsForItsRun(t *testing.T) {
	back := rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: oldRef, TargetImage: oldRef}
	for _, tt := range []struct {
		name    string
		members []string
		run     string
		want    string
	}{
		{"a set, its revert run under way", []string{"migrate", "api"}, events.PurposeRevert, ""},
		{"a set, its revert run ended", []string{"migrate", "api"}, "", events.TypeClusterReverted},
		{"an application, its revert run under way", nil, events.PurposeRevert, events.TypeClusterReverted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterReverting, oldRef)})
			r.Members, r.Waves[0].Clusters[0].Run = tt.members, tt.run
			got, _ := r.Classify(&r.Waves[0].Clusters[0], events.Canary{Cluster: "c1", Outcome: events.CanarySucceeded}, back)
			if got != tt.want {
				t.Errorf("Classify = %q, want %q", got, tt.want)
			}
		})
	}
}

// A revert applied while Flagger failed the canary is recorded by Flagger
// as the spec it saw: it never takes it up, and the primary stays on the
// rollout's image. The cluster's revert is applied again with a restart
// token (and the previous version's tag), and says why; a status Flagger
// settled before the revert's run ended, one under way, one with the
// primary back, or a run not ended is left alone.
// Catches: the rollback of waves.feature's bake scenario ending
// RollbackFailed at the revert's deadline (CI, session 38).
func TestCanaryNudgesAMissedRevert(t *testing.T) {
	stuck := rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: oldRef, Transition: t0.Add(time.Second)}
	tests := []struct {
		name   string
		status rollout.CanaryStatus
		run    string
		nudges int
		want   []string
	}{
		{"failed after the revert ended, primary on the new image: reverted again", stuck, "", 0,
			[]string{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:10:00"}},
		{"failed in the second the revert ended: reverted again",
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: oldRef, Transition: t0}, "", 0,
			[]string{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:10:00"}},
		{"failed before the revert ended: Flagger will see it",
			rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: oldRef, Transition: t0.Add(-time.Second)}, "", 0, nil},
		{"the revert's run still under way", stuck, events.PurposeRevert, 0, nil},
		{"Flagger took the revert up", rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: newRef, TargetImage: oldRef, Transition: t0.Add(time.Second)}, "", 0, nil},
		{"the workload still on the new image", rollout.CanaryStatus{Phase: "Failed", PrimaryImage: newRef, TargetImage: newRef, Transition: t0.Add(time.Second)}, "", 0, nil},
		{"nudged enough: the deadline decides", stuck, "", rollout.MaxNudges, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterReverting, oldRef)})
			r.ID, r.Phase, r.PreviousDigest, r.PreviousTag = "app-1", rollout.Failed, "sha256:old", "1.0.0"
			c := &r.Waves[0].Clusters[0]
			c.Applied, c.Nudges, c.Step, c.Run = t0.Add(284*time.Millisecond), tt.nudges, 3, tt.run
			out, err := r.Canary(cause(t), events.Canary{Cluster: "c1", Outcome: events.CanaryFailed}, tt.status, t0.Add(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, types(out)); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if tt.want == nil {
				if c.Phase != rollout.ClusterReverting {
					t.Errorf("cluster %s", c.Phase)
				}
				return
			}
			req, err := events.Decode[events.PipelineRunRequested](out[0])
			if err != nil {
				t.Fatal(err)
			}
			want := events.PipelineRunRequested{RolloutID: "app-1", Cluster: "c1", Purpose: events.PurposeRevert, Step: 4,
				Image: oldRef, Tag: "1.0.0", Restart: "app-1/0/revert/4", Deadline: t0.Add(10 * time.Minute)}
			if diff := cmp.Diff(want, req); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if c.Phase != rollout.ClusterReverting || c.Run != events.PurposeRevert || c.Nudges != 1 {
				t.Errorf("cluster %s, run %q, nudges %d", c.Phase, c.Run, c.Nudges)
			}
		})
	}
}
