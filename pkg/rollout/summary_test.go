package rollout_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func TestSummaries(t *testing.T) {
	two := []rollout.Wave{
		{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded}}},
		{Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterSucceeded}, {Name: "c3", Phase: rollout.ClusterFailed}}},
	}
	tests := []struct {
		name string
		ro   rollout.Rollout
		want [2]string
	}{
		{"no waves", rollout.Rollout{}, [2]string{"", "0/0"}},
		{"first wave, named", rollout.Rollout{Waves: two}, [2]string{"1/2 canary", "2/3"}},
		{"second wave, unnamed", rollout.Rollout{Wave: 1, Waves: two}, [2]string{"2/2", "2/3"}},
		{"past the last wave", rollout.Rollout{Wave: 5, Waves: two}, [2]string{"2/2", "2/3"}},
	}
	for _, tt := range tests {
		got := [2]string{tt.ro.WaveSummary(), tt.ro.ClustersSummary()}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
