package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func TestRevertNow(t *testing.T) {
	tests := []struct {
		name string
		r    *rollout.Rollout
		want []int
	}{
		{"newest wave that took the digest first", waves(
			[]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, oldRef)},
			[]rollout.Cluster{cl("c2", rollout.ClusterFailed, oldRef)},
			[]rollout.Cluster{cl("c3", rollout.ClusterPending, "")}), []int{1}},
		{"a wave being reverted holds the older ones", waves(
			[]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, oldRef)},
			[]rollout.Cluster{cl("c2", rollout.ClusterReverting, oldRef)}), nil},
		{"a late taker of a newer wave does not wait", waves(
			[]rollout.Cluster{cl("c1", rollout.ClusterReverting, oldRef)},
			[]rollout.Cluster{cl("c2", rollout.ClusterProgressing, oldRef)}), []int{1}},
		{"nothing took the digest", waves([]rollout.Cluster{cl("c1", rollout.ClusterFailed, "")}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.r.RevertNow()); diff != "" {
				t.Errorf("RevertNow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRollback(t *testing.T) {
	g := rollout.Reverts{App: config.Application{Name: "app"}, PreviousTag: func(string) string { return "" }, Now: t0}
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, oldRef)}, []rollout.Cluster{cl("c2", rollout.ClusterFailed, oldRef), cl("c3", rollout.ClusterFailed, "")})
	r.Phase, r.Wave, r.Reason = rollout.Failed, 1, "wave 2 failed"
	steps := [][]string{}
	for range 5 {
		out, err := r.Rollback(cause(t), g)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, types(out))
		for _, c := range r.InPhase(rollout.ClusterReverting) {
			c.Phase = rollout.ClusterReverted
		}
		if len(out) == 0 {
			break
		}
	}
	want := [][]string{
		{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:02:00"}, // c2, wave 2 first
		{events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:02:00"}, // then c1
		{events.TypeRolloutRolledBack},
		nil,
	}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("rollback steps (-want +got):\n%s", diff)
	}
	if r.Phase != rollout.RolledBack {
		t.Errorf("phase %s, want RolledBack", r.Phase)
	}
}

func TestRollbackFailedAndRetried(t *testing.T) {
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterRevertFailed, oldRef)})
	r.Waves[0].Clusters[0].Message = "revert failed: boom"
	r.Phase, r.Reason = rollout.Failed, "wave 1 failed"
	out, err := r.Rollback(cause(t), rollout.Reverts{PreviousTag: func(string) string { return "" }, Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{events.TypeRolloutRollbackFailed}, types(out)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if want := "wave 1 failed; rollback failed: cluster c1: revert failed: boom"; r.Phase != rollout.RollbackFailed || r.Reason != want {
		t.Errorf("%s %q, want RollbackFailed %q", r.Phase, r.Reason, want)
	}
	if _, err := r.RetryRollback(cause(t), events.RolloutRetryRequested{RolloutID: r.ID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	if c := r.Waves[0].Clusters[0]; r.Phase != rollout.Failed || c.Phase != rollout.ClusterFailed || r.Retries != 1 {
		t.Errorf("after the retry: %s, cluster %s, retries %d", r.Phase, c.Phase, r.Retries)
	}
}
