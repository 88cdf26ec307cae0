package rollout_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A release of several workloads stands where its least advanced canary
// does, and runs a revision only where every workload does. Catches: a
// release judged by its first canary (promoted while the worker still
// analyses, or its failure missed), and mixed primaries read as one.
func TestCombine(t *testing.T) {
	t1, t2 := t0.Add(time.Second), t0.Add(2*time.Second)
	w := func(name, phase, primary, target string, at time.Time) rollout.WorkloadStatus {
		return rollout.WorkloadStatus{Name: name, Phase: phase, PrimaryImage: primary, TargetImage: target, Transition: at, Weight: len(phase)}
	}
	mixed := "mixed: web=" + oldRef + ", worker=" + newRef
	tests := []struct {
		name string
		ws   []rollout.WorkloadStatus
		want rollout.CanaryStatus
	}{
		{"one workload is itself", []rollout.WorkloadStatus{w("web", "Succeeded", newRef, newRef, t1)},
			rollout.CanaryStatus{Phase: "Succeeded", Weight: 9, PrimaryImage: newRef, TargetImage: newRef, Transition: t1}},
		{"both promoted", []rollout.WorkloadStatus{w("web", "Succeeded", newRef, newRef, t1), w("worker", "Succeeded", newRef, newRef, t2)},
			rollout.CanaryStatus{Phase: "Succeeded", Weight: 9, PrimaryImage: newRef, TargetImage: newRef, Transition: t1}},
		{"one promoted, one analysing", []rollout.WorkloadStatus{w("web", "Succeeded", newRef, newRef, t1), w("worker", "Progressing", oldRef, newRef, t2)},
			rollout.CanaryStatus{Phase: "Progressing", Weight: 11, PrimaryImage: "mixed: web=" + newRef + ", worker=" + oldRef, TargetImage: newRef, Transition: t2}},
		{"one analysing, one failed: failed", []rollout.WorkloadStatus{w("web", "Progressing", oldRef, newRef, t1), w("worker", "Failed", oldRef, newRef, t2)},
			rollout.CanaryStatus{Phase: "Failed", Weight: 6, PrimaryImage: oldRef, TargetImage: newRef, Transition: t2}},
		{"one resting initialized on an older primary", []rollout.WorkloadStatus{w("web", "Succeeded", newRef, newRef, t1), w("worker", "Initialized", oldRef, newRef, t2)},
			rollout.CanaryStatus{Phase: "Initialized", Weight: 11, PrimaryImage: "mixed: web=" + newRef + ", worker=" + oldRef, TargetImage: newRef, Transition: t2}},
		{"the apply reached one workload", []rollout.WorkloadStatus{w("web", "Initialized", oldRef, oldRef, t1), w("worker", "Initialized", oldRef, newRef, t1)},
			rollout.CanaryStatus{Phase: "Initialized", Weight: 11, PrimaryImage: oldRef, TargetImage: mixed, Transition: t1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := rollout.Combine(tt.ws)
			if len(tt.ws) > 1 {
				tt.want.Workloads = tt.ws
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Combine (-want +got):\n%s", d)
			}
		})
	}
}

// A cluster of a release of two workloads succeeds on the event of the
// later canary to promote, not the first; the failure of either fails it,
// naming the workload; the cluster records each canary's phase.
func TestCanaryOfARelease(t *testing.T) {
	status := func(web, worker rollout.WorkloadStatus) rollout.CanaryStatus {
		web.Name, worker.Name = "web", "worker"
		return rollout.Combine([]rollout.WorkloadStatus{web, worker})
	}
	promoted := rollout.WorkloadStatus{Phase: "Succeeded", PrimaryImage: newRef, TargetImage: newRef}
	analysing := rollout.WorkloadStatus{Phase: "Progressing", PrimaryImage: oldRef, TargetImage: newRef}
	failed := rollout.WorkloadStatus{Phase: "Failed", PrimaryImage: oldRef, TargetImage: newRef}
	tests := []struct {
		name       string
		event      events.Canary
		st         rollout.CanaryStatus
		wantType   string
		wantReason string
		wantPhases map[string]string
	}{
		{"the first promoted, the second analysing", events.Canary{Cluster: "c1", Name: "web", Outcome: events.CanarySucceeded, Message: "Promotion completed!"},
			status(promoted, analysing), "", "", map[string]string{"web": "Succeeded", "worker": "Progressing"}},
		{"the second promoted too", events.Canary{Cluster: "c1", Name: "worker", Outcome: events.CanarySucceeded, Message: "Promotion completed!"},
			status(promoted, promoted), events.TypeClusterSucceeded, "worker: Promotion completed!", map[string]string{"web": "Succeeded", "worker": "Succeeded"}},
		{"the second failed while the first promoted", events.Canary{Cluster: "c1", Name: "worker", Outcome: events.CanaryFailed, Message: "Canary failed!"},
			status(promoted, failed), events.TypeClusterFailed, "worker: Canary failed!", map[string]string{"web": "Succeeded", "worker": "Failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterProgressing, oldRef)})
			r.Phase = rollout.Progressing
			cause, err := events.New("e1", "test", events.TypeCanary, tt.event)
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Canary(cause, tt.event, tt.st, t0)
			if err != nil {
				t.Fatal(err)
			}
			var gotType, gotReason string
			if len(out) == 1 {
				gotType = out[0].Type()
				res, err := events.Decode[events.ClusterResult](out[0])
				if err != nil {
					t.Fatal(err)
				}
				gotReason = res.Reason
			} else if len(out) > 1 {
				t.Fatalf("Canary emitted %d events", len(out))
			}
			if gotType != tt.wantType || gotReason != tt.wantReason {
				t.Errorf("Canary = %q %q, want %q %q", gotType, gotReason, tt.wantType, tt.wantReason)
			}
			if d := cmp.Diff(tt.wantPhases, r.Waves[0].Clusters[0].Workloads); d != "" {
				t.Errorf("the cluster's workloads (-want +got):\n%s", d)
			}
		})
	}
}
