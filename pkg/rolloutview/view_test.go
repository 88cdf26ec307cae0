package rolloutview_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/rolloutview"
)

var ro = rollout.Rollout{ID: "r1", Phase: rollout.Progressing, Wave: 1, Waves: []rollout.Wave{
	{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded, CanaryPhase: "Succeeded"}}},
	{Name: "prod", Clusters: []rollout.Cluster{
		{Name: "c2", Phase: rollout.ClusterProgressing, CanaryPhase: "Progressing", CanaryWeight: 30, Message: "analysing"},
		{Name: "c10", Phase: rollout.ClusterPending},
	}},
}}

func TestTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    rolloutview.Options
		want string
	}{
		{"plain", rolloutview.Options{}, `
WAVE       CLUSTER  STATE        FLAGGER      WEIGHT
 1 canary  c1       Succeeded    Succeeded    [..........]   0%
*2 prod    c2       Progressing  Progressing  [###.......]  30%
*2 prod    c10      Pending      -            [..........]   0%
`},
		{"a column", rolloutview.Options{Columns: []rolloutview.Column{{Header: "MESSAGE", Cell: func(c rollout.Cluster) string { return c.Message }}}}, `
WAVE       CLUSTER  STATE        FLAGGER      WEIGHT             MESSAGE
 1 canary  c1       Succeeded    Succeeded    [..........]   0%  -
*2 prod    c2       Progressing  Progressing  [###.......]  30%  analysing
*2 prod    c10      Pending      -            [..........]   0%  -
`},
		{"colour", rolloutview.Options{Color: true}, `
WAVE       CLUSTER  STATE        FLAGGER      WEIGHT
 1 canary  c1       ` + "\x1b[32mSucceeded  \x1b[0m  \x1b[32mSucceeded  \x1b[0m" + `  [..........]   0%
*2 prod    c2       ` + "\x1b[36mProgressing\x1b[0m  \x1b[36mProgressing\x1b[0m" + `  [###.......]  30%
*2 prod    c10      Pending      -            [..........]   0%
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			rolloutview.Table(&b, ro, tc.o)
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A cluster that failed its wave stays apart from those reverted because
// of it: its state says so, in red; theirs is Reverted, in yellow.
func TestFailedStandsApartFromReverted(t *testing.T) {
	r := rollout.Rollout{ID: "r2", Phase: rollout.RolledBack, Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{
		{Name: "c1", Phase: rollout.ClusterReverted},
		{Name: "c4", Phase: rollout.ClusterReverted, Failure: "Flagger's analysis failed"},
	}}}}
	var b strings.Builder
	rolloutview.Table(&b, r, rolloutview.Options{Color: true})
	want := `WAVE    CLUSTER  STATE             FLAGGER  WEIGHT
 1 all  c1       ` + "\x1b[33mReverted        \x1b[0m" + `  -        [..........]   0%
 1 all  c4       ` + "\x1b[31mFailed, reverted\x1b[0m" + `  -        [..........]   0%
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLine(t *testing.T) {
	want := "Progressing | wave 1: c1=Succeeded/Succeeded/0% | wave 2: c2=Progressing/Progressing/30% c10=Pending/-/0%"
	if diff := cmp.Diff(want, rolloutview.Line(ro)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
