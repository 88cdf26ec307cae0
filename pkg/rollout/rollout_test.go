package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// cl is a cluster in phase p; prev is its previous image ("" if it never took
// the new digest).
func cl(name string, p rollout.ClusterPhase, prev string) rollout.Cluster {
	return rollout.Cluster{Name: name, Phase: p, PreviousImage: prev}
}

// waves builds a rollout whose waves hold the given clusters.
func waves(ws ...[]rollout.Cluster) *rollout.Rollout {
	r := &rollout.Rollout{ID: "app-1", Image: "registry.test/team/app", Digest: "sha256:abc"}
	for i, cs := range ws {
		r.Waves = append(r.Waves, rollout.Wave{Name: "wave-" + string(rune('1'+i)), Clusters: cs})
	}
	return r
}

func TestPhaseDone(t *testing.T) {
	tests := []struct {
		phase rollout.Phase
		want  bool
	}{
		{rollout.Progressing, false},
		{rollout.Failed, false}, // the rollback is still under way
		{rollout.Succeeded, true},
		{rollout.RolledBack, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			if got := tt.phase.Done(); got != tt.want {
				t.Errorf("%s.Done() = %v, want %v", tt.phase, got, tt.want)
			}
		})
	}
}

func TestRef(t *testing.T) {
	r := waves()
	if got, want := r.Ref(), "registry.test/team/app@sha256:abc"; got != want {
		t.Errorf("Ref() = %q, want %q", got, want)
	}
}

func TestCluster(t *testing.T) {
	r := waves(
		[]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "old")},
		[]rollout.Cluster{cl("c2", rollout.ClusterPending, ""), cl("c3", rollout.ClusterApplying, "")},
	)
	tests := []struct {
		name     string
		cluster  string
		wantWave int
		wantErr  bool
	}{
		{"first wave", "c1", 0, false},
		{"second wave, first cluster", "c2", 1, false},
		{"second wave, second cluster", "c3", 1, false},
		{"unknown", "c9", -1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, w, err := r.Cluster(tt.cluster)
			if w != tt.wantWave {
				t.Errorf("Cluster(%q) wave = %d, want %d", tt.cluster, w, tt.wantWave)
			}
			if tt.wantErr {
				if err == nil || c != nil {
					t.Fatalf("Cluster(%q) = %v, %v; want nil and an error", tt.cluster, c, err)
				}
				if want := `rollout app-1 has no cluster "c9"`; err.Error() != want {
					t.Errorf("error = %q, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Cluster(%q): %v", tt.cluster, err)
			}
			if c.Name != tt.cluster {
				t.Errorf("Cluster(%q) returned %q", tt.cluster, c.Name)
			}
		})
	}

	// The pointer is into the rollout, so callers change it in place.
	c, _, _ := r.Cluster("c3")
	c.Phase = rollout.ClusterProgressing
	if got := r.Waves[1].Clusters[1].Phase; got != rollout.ClusterProgressing {
		t.Errorf("after changing the returned cluster, the rollout has phase %s", got)
	}
}

func TestWaveOutcome(t *testing.T) {
	tests := []struct {
		name       string
		clusters   []rollout.Cluster
		wantDone   bool
		wantFailed int
	}{
		{"all succeeded", []rollout.Cluster{cl("a", rollout.ClusterSucceeded, ""), cl("b", rollout.ClusterSucceeded, "")}, true, 0},
		{"one still progressing", []rollout.Cluster{cl("a", rollout.ClusterSucceeded, ""), cl("b", rollout.ClusterProgressing, "")}, false, 0},
		{"pending", []rollout.Cluster{cl("a", rollout.ClusterPending, "")}, false, 0},
		{"applying", []rollout.Cluster{cl("a", rollout.ClusterApplying, "")}, false, 0},
		{"one failed, one running", []rollout.Cluster{cl("a", rollout.ClusterFailed, ""), cl("b", rollout.ClusterProgressing, "")}, false, 1},
		{"one failed, one succeeded", []rollout.Cluster{cl("a", rollout.ClusterFailed, ""), cl("b", rollout.ClusterSucceeded, "")}, true, 1},
		{"all failed", []rollout.Cluster{cl("a", rollout.ClusterFailed, ""), cl("b", rollout.ClusterFailed, "")}, true, 2},
		{"reverting is not done", []rollout.Cluster{cl("a", rollout.ClusterReverting, "")}, false, 0},
		{"reverted is not done", []rollout.Cluster{cl("a", rollout.ClusterReverted, "")}, false, 0},
		{"empty wave", nil, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves(tt.clusters)
			done, failed := r.WaveOutcome(0)
			if done != tt.wantDone || failed != tt.wantFailed {
				t.Errorf("WaveOutcome(0) = %v, %d; want %v, %d", done, failed, tt.wantDone, tt.wantFailed)
			}
		})
	}
}

func TestToRevert(t *testing.T) {
	tests := []struct {
		name     string
		clusters []rollout.Cluster
		want     []string
	}{
		{"every phase that took the digest", []rollout.Cluster{
			cl("applying", rollout.ClusterApplying, "old"),
			cl("progressing", rollout.ClusterProgressing, "old"),
			cl("succeeded", rollout.ClusterSucceeded, "old"),
			cl("failed", rollout.ClusterFailed, "old"),
		}, []string{"applying", "progressing", "succeeded", "failed"}},
		{"pending, reverting and reverted are left alone", []rollout.Cluster{
			cl("pending", rollout.ClusterPending, "old"),
			cl("reverting", rollout.ClusterReverting, "old"),
			cl("reverted", rollout.ClusterReverted, "old"),
		}, nil},
		{"no previous image: nothing to restore", []rollout.Cluster{
			cl("failed-before-apply", rollout.ClusterFailed, ""),
			cl("succeeded", rollout.ClusterSucceeded, "old"),
		}, []string{"succeeded"}},
		{"empty wave", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves(tt.clusters)
			if diff := cmp.Diff(tt.want, r.ToRevert(0)); diff != "" {
				t.Errorf("ToRevert(0) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevertWave(t *testing.T) {
	done := []rollout.Cluster{cl("a", rollout.ClusterSucceeded, "old")}
	reverted := []rollout.Cluster{cl("a", rollout.ClusterReverted, "old")}
	pending := []rollout.Cluster{cl("a", rollout.ClusterPending, "")}
	tests := []struct {
		name string
		r    *rollout.Rollout
		from int
		want int
	}{
		{"newest wave with work", waves(done, done, pending), 2, 1},
		{"from beyond the last wave", waves(done, done), 7, 1},
		{"from limits the search", waves(done, done, done), 0, 0},
		{"newer waves already reverted", waves(done, reverted, reverted), 2, 0},
		{"nothing left", waves(reverted, reverted), 1, -1},
		{"nothing started", waves(pending, pending), 1, -1},
		{"negative from", waves(done), -1, -1},
		{"no waves", waves(), 3, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.RevertWave(tt.from); got != tt.want {
				t.Errorf("RevertWave(%d) = %d, want %d", tt.from, got, tt.want)
			}
		})
	}
}

func TestReverting(t *testing.T) {
	tests := []struct {
		name     string
		clusters []rollout.Cluster
		want     bool
	}{
		{"one reverting", []rollout.Cluster{cl("a", rollout.ClusterReverted, "old"), cl("b", rollout.ClusterReverting, "old")}, true},
		{"all reverted", []rollout.Cluster{cl("a", rollout.ClusterReverted, "old"), cl("b", rollout.ClusterReverted, "old")}, false},
		{"not started", []rollout.Cluster{cl("a", rollout.ClusterFailed, "old")}, false},
		{"empty", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waves(tt.clusters).Reverting(0); got != tt.want {
				t.Errorf("Reverting(0) = %v, want %v", got, tt.want)
			}
		})
	}
}
