package advance_test

import (
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A burst of a rollout's cluster results folded into one call leaves the
// rollout as recording them one at a time does, derives the same events,
// each from its own input, and writes the rollout once; it stops at an
// event of another kind.
func TestAdvanceFoldsABurst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		budget int
		// results: cluster -> "" (succeeded) or a failure's reason.
		results [][2]string
	}{
		{"wave 1 succeeds, wave 2 starts and succeeds", 0, [][2]string{{"c1", ""}, {"c2", ""}, {"c1", ""}, {"c3", ""}}},
		{"a failure beyond wave 2's budget fails the rollout", 0, [][2]string{{"c1", ""}, {"c2", "boom"}, {"c3", ""}}},
		{"a failure within the budget", 1, [][2]string{{"c1", ""}, {"c3", "boom"}, {"c2", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			burst := func(t *testing.T) []cloudevents.Event {
				t.Helper()
				var es []cloudevents.Event
				for i, r := range tc.results {
					typ := events.TypeClusterSucceeded
					if r[1] != "" {
						typ = events.TypeClusterFailed
					}
					e := clusterResult(t, typ, r[0], r[1])
					e.SetID("in" + string(rune('a'+i)))
					es = append(es, e)
				}
				return append(es, control(t, events.TypeRolloutPauseRequested, rolloutID))
			}
			stored := func(t *testing.T) (*advance.Function, func() rollout.Rollout) {
				t.Helper()
				repo := functiontest.NewRepo(t)
				newRollout(t, repo, state{Phase: rollout.Progressing, Budget: tc.budget, Clusters: map[string]rollout.ClusterPhase{
					"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
				return advance.New(&config.Config{}, repo, nil), func() rollout.Rollout {
					ro, err := repo.Get(t.Context(), rolloutID)
					if err != nil {
						t.Fatal(err)
					}
					return ro
				}
			}

			one, readOne := stored(t)
			var want [][]string
			for _, e := range burst(t)[:len(tc.results)] {
				out, err := one.Handle(t.Context(), e)
				if err != nil {
					t.Fatalf("handling %s alone: %v", e.ID(), err)
				}
				want = append(want, ids(out))
			}

			folded, readFolded := stored(t)
			before := readFolded().Version
			out, err := folded.HandleFolded(t.Context(), burst(t))
			if err != nil {
				t.Fatal(err)
			}
			var got [][]string
			for _, o := range out {
				got = append(got, ids(o))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events derived from each (-one at a time +folded):\n%s", diff)
			}
			if diff := cmp.Diff(stateOf(readOne()), stateOf(readFolded())); diff != "" {
				t.Errorf("rollout (-one at a time +folded):\n%s", diff)
			}
			if v := readFolded().Version; v != before+1 {
				t.Errorf("the rollout was written %d times, want once", v-before)
			}
		})
	}
}

// Results of another rollout, or an event that is not a cluster result,
// end the burst; none at its head: nothing folded.
func TestAdvanceFoldStops(t *testing.T) {
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, state{Phase: rollout.Progressing, Clusters: map[string]rollout.ClusterPhase{
		"c1": rollout.ClusterProgressing, "c2": rollout.ClusterPending, "c3": rollout.ClusterPending}})
	fn := advance.New(&config.Config{}, repo, nil)
	other, err := events.New("other", events.Source, events.TypeClusterSucceeded, events.ClusterResult{RolloutID: "shop-2", Cluster: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.HandleFolded(t.Context(), []cloudevents.Event{clusterResult(t, events.TypeClusterSucceeded, "c1", ""), other})
	if err != nil || len(out) != 1 {
		t.Errorf("HandleFolded = %d handled, %v; want the first only", len(out), err)
	}
	out, err = fn.HandleFolded(t.Context(), []cloudevents.Event{control(t, events.TypeRolloutPauseRequested, rolloutID)})
	if err != nil || len(out) != 0 {
		t.Errorf("HandleFolded of a control = %d handled, %v; want none", len(out), err)
	}
}

func ids(evs []cloudevents.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID())
	}
	return out
}
