package embedded_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// The rollouts in flight are kept decoded: a read after a write sees the
// write, a read's result changed by its caller changes nothing kept, and a
// write that failed leaves the next read to the store.
func TestRepoHotRollouts(t *testing.T) {
	ctx := t.Context()
	r := newRepo(t, newClock().Now)
	if _, err := r.Create(ctx, sample("r1")); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	got.Waves[0].Clusters[0].Phase = rollout.ClusterFailed // a caller's change, not kept
	got.Reason = "changed by a reader"
	listed, err := r.ListInFlight(ctx)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListInFlight: %d rollouts, %v", len(listed), err)
	}
	listed[0].Waves[0].Clusters[0].Phase = rollout.ClusterFailed // nor this one
	if _, err := r.Update(ctx, "r1", func(ro *rollout.Rollout) error {
		ro.Waves[0].Clusters[0].Phase = rollout.ClusterProgressing
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := r.Update(ctx, "r1", func(ro *rollout.Rollout) error {
		ro.Waves[0].Clusters[0].Phase = rollout.ClusterSucceeded
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("a failing update: %v, want %v", err, boom)
	}
	got, err = r.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	want := struct {
		Phase   rollout.ClusterPhase
		Reason  string
		Version int64
	}{rollout.ClusterProgressing, "", 2}
	if diff := cmp.Diff(want, struct {
		Phase   rollout.ClusterPhase
		Reason  string
		Version int64
	}{got.Waves[0].Clusters[0].Phase, got.Reason, got.Version}); diff != "" {
		t.Errorf("read after the writes (-want +got):\n%s", diff)
	}
	// Finished, it is read from the archive.
	if _, err := r.Update(ctx, "r1", func(ro *rollout.Rollout) error { ro.Phase = rollout.Succeeded; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err = r.Get(ctx, "r1"); err != nil || got.Phase != rollout.Succeeded {
		t.Errorf("read after it finished: %v, %v; want it Succeeded", got.Phase, err)
	}
}

// BenchmarkGetRollout reads a rollout of 1 + 50 clusters, as each of a
// wave's 50 pipeline runs and each function handling their results does,
// and of 1 + 1,000 clusters (make bench's large wave).
func BenchmarkGetRollout(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			r := benchRepo(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Get(b.Context(), "r1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPhase reads a rollout's phase, as each pipeline run does to
// learn whether its rollout has ended (it was a Get: a copy of the whole
// rollout, 1,000 times in a wave of 1,000).
func BenchmarkPhase(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			r := benchRepo(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.Phase(b.Context(), "r1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUpdateRollout changes one cluster of a rollout of 1 + n
// clusters, as observe does for each of Flagger's events.
func BenchmarkUpdateRollout(b *testing.B) {
	for _, n := range []int{50, 1000} {
		b.Run(fmt.Sprintf("clusters=%d", n), func(b *testing.B) {
			r := benchRepo(b, n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := r.Update(b.Context(), "r1", func(ro *rollout.Rollout) error {
					ro.Waves[1].Clusters[i%n].CanaryWeight = i % 100
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchRepo is a repository holding rollout r1 of 1 + n clusters.
func benchRepo(b *testing.B, n int) *embedded.Repo {
	b.Helper()
	s, err := store.Open(filepath.Join(b.TempDir(), "db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	r := embedded.NewRepo(s, nil)
	ro := sample("r1")
	var w2 rollout.Wave
	w2.Name = "wave-2"
	for i := range n {
		w2.Clusters = append(w2.Clusters, rollout.Cluster{Name: fmt.Sprintf("cluster-%04d", i), Phase: rollout.ClusterProgressing,
			Message: "applied registry.test/team/app@sha256:abc", PreviousImage: "registry.test/team/app@sha256:def"})
	}
	ro.Waves = append(ro.Waves, w2)
	if _, err := r.Create(b.Context(), ro); err != nil {
		b.Fatal(err)
	}
	return r
}
