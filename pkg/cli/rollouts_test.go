package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// get rollouts names each rollout's kind: what started it.
func TestPrintRolloutsKind(t *testing.T) {
	created := time.Now()
	for _, tc := range []struct {
		name string
		r    rollout.Rollout
		want string
	}{
		{"a push by webhook", rollout.Rollout{Source: rollout.SourceWebhook}, "push"},
		{"a push found by a poll", rollout.Rollout{Source: rollout.SourcePoll}, "push"},
		{"a rollback", rollout.Rollout{RollbackOf: "shop-1"}, "rollback"},
		{"a catch-up", rollout.Rollout{Kind: rollout.KindCatchUp}, "catch-up"},
		{"a drift revert", rollout.Rollout{Kind: rollout.KindDriftRevert}, "drift-revert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.ID, r.Application, r.Tag, r.Digest, r.Phase, r.Created = "shop-2", "shop", "1.1.0", "sha256:0123456789abcdef", rollout.Succeeded, created
			r.Waves = []rollout.Wave{{Name: "w1", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded}}}}
			var b strings.Builder
			printRollouts(&b, []rollout.Rollout{r}, false)
			lines := strings.Split(strings.TrimSpace(b.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("get rollouts printed %d lines, want a header and a row:\n%s", len(lines), b.String())
			}
			got := map[string]string{}
			header, row := strings.Fields(lines[0]), strings.Fields(lines[1])
			for i, h := range header[:len(header)-1] { // WAITING is "-"
				got[h] = row[i]
			}
			want := map[string]string{"ID": "shop-2", "APPLICATION": "shop", "KIND": tc.want, "TAG": "1.1.0",
				"DIGEST": short(r.Digest), "PHASE": "Succeeded", "WAVE": "1/1", "CLUSTERS": "1/1", "AGE": age(created)}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("get rollouts' row (-want +got):\n%s\n%s", d, b.String())
			}
		})
	}
}
