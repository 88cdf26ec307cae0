package rollout_test

import (
	"errors"
	"testing"

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
