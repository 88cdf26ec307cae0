package advance_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/quick"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/advance"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// The rule advance keeps whatever the order of the cluster results and
// however often each is delivered: a wave starts only once every cluster
// of the wave before it has finished and no more of them failed than its
// budget; a rollout fails as soon as a wave's failures exceed the budget,
// and never succeeds with a wave over budget.
func TestAdvanceWaveOrderProperty(t *testing.T) {
	property := func(seed uint64) bool {
		rng := rand.New(rand.NewPCG(seed, seed>>1))
		return checkRandomRollout(t, rng)
	}
	if err := quick.Check(property, &quick.Config{MaxCount: 200}); err != nil {
		t.Error(err)
	}
}

func checkRandomRollout(t *testing.T, rng *rand.Rand) bool {
	t.Helper()
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	// 2-4 waves of 1-4 clusters, each with a random budget.
	ro := rollout.Rollout{ID: rolloutID, Application: "shop", Image: "registry.test/team/shop", Tag: "1.3.0", Digest: "sha256:new", Phase: rollout.Progressing}
	var names [][]string
	for w := range 2 + rng.IntN(3) {
		wave := rollout.Wave{Name: fmt.Sprintf("w%d", w)}
		var ns []string
		for c := range 1 + rng.IntN(4) {
			n := fmt.Sprintf("w%dc%d", w, c)
			ns = append(ns, n)
			wave.Clusters = append(wave.Clusters, rollout.Cluster{Name: n, Phase: rollout.ClusterProgressing})
		}
		wave.MaxFailures = rng.IntN(len(ns) + 1)
		ro.Waves = append(ro.Waves, wave)
		names = append(names, ns)
	}
	if _, err := repo.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	fn := advance.New(&config.Config{}, repo, nil)
	// Every cluster's result (random outcome), shuffled, some repeated;
	// as results of later waves arrive before their wave started, they
	// must be ignored or recorded without moving the rollout.
	type result struct {
		cluster string
		wave    int
		failed  bool
	}
	var results []result
	for w, ns := range names {
		for _, n := range ns {
			r := result{n, w, rng.IntN(4) == 0}
			results = append(results, r)
			for rng.IntN(3) == 0 {
				results = append(results, r)
			}
		}
	}
	rng.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
	for _, r := range results {
		typ := events.TypeClusterSucceeded
		if r.failed {
			typ = events.TypeClusterFailed
		}
		e, err := events.New(fmt.Sprintf("r-%s-%d", r.cluster, rng.Int()), events.Source, typ,
			events.ClusterResult{RolloutID: rolloutID, Wave: r.wave, Cluster: r.cluster})
		if err != nil {
			t.Fatal(err)
		}
		e.SetExtension(events.ExtRolloutID, rolloutID)
		before, err := repo.Get(ctx, rolloutID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fn.Handle(ctx, e); err != nil {
			t.Fatal(err)
		}
		after, err := repo.Get(ctx, rolloutID)
		if err != nil {
			t.Fatal(err)
		}
		if msg := violation(before, after); msg != "" {
			t.Logf("after %s of %s: %s", typ, r.cluster, msg)
			return false
		}
	}
	return true
}

// violation checks one transition of advance against the rule.
func violation(before, after rollout.Rollout) string {
	for w := before.Wave; w < after.Wave; w++ {
		done, failed := after.WaveOutcome(w)
		if !done || failed > after.Waves[w].MaxFailures {
			return fmt.Sprintf("wave %d started, but wave %d was done %v with %d failures (budget %d)", w+1, w, done, failed, after.Waves[w].MaxFailures)
		}
	}
	if after.Phase == rollout.Succeeded {
		for w := range after.Waves {
			if done, failed := after.WaveOutcome(w); !done || failed > after.Waves[w].MaxFailures {
				return fmt.Sprintf("succeeded with wave %d done %v, %d failures (budget %d)", w, done, failed, after.Waves[w].MaxFailures)
			}
		}
	}
	if after.Phase == rollout.Progressing {
		if _, failed := after.WaveOutcome(after.Wave); failed > after.Waves[after.Wave].MaxFailures {
			return fmt.Sprintf("still progressing with %d failures in wave %d (budget %d)", failed, after.Wave, after.Waves[after.Wave].MaxFailures)
		}
	}
	return ""
}
