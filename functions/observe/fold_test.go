package observe_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/observe"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A burst of a rollout's events folded into one call leaves the rollout
// as handling them one at a time does, emits the same events, each from
// its own input, and writes the rollout once; it stops at an event of
// another kind.
func TestObserveFoldsABurst(t *testing.T) {
	// c1 and c2 were applied; c1's canary progresses and promotes; c2's
	// apply run ends; then a deadline, which observe handles alone.
	burst := func(t *testing.T) []cloudevents.Event {
		t.Helper()
		progress := canaryEvent(t, events.Canary{RolloutID: rolloutID, Cluster: "c1", Outcome: events.CanaryProgressing, Message: "Advance shop-api.web canary weight 10"})
		progress.SetID("p1")
		done := canaryEvent(t, events.Canary{RolloutID: rolloutID, Cluster: "c1", Outcome: events.CanarySucceeded, Message: "Promotion completed!"})
		done.SetID("s1")
		fin := engineEvent(t, "fin2", events.TypePipelineRunFinished, events.PipelineRunFinished{
			RolloutID: rolloutID, Cluster: "c2", Purpose: events.PurposeApply, Step: 1, PreviousImage: prev, Changed: true,
		})
		dl := engineEvent(t, "dl", events.TypeClusterDeadline, events.ClusterDeadline{RolloutID: rolloutID, Cluster: "c2", Purpose: events.PurposeApply, Step: 1})
		return []cloudevents.Event{progress, done, fin, dl}
	}
	st := status(rollout.CanaryStatus{Phase: "Succeeded", PrimaryImage: ref, TargetImage: ref, Weight: 0})
	stored := func(t *testing.T) (*observe.Function, func() rollout.Rollout) {
		t.Helper()
		repo := functiontest.NewRepo(t)
		ro := rollout.Rollout{
			ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: "sha256:new", Phase: rollout.Progressing,
			Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{
				{Name: "c1", Phase: rollout.ClusterProgressing, PreviousImage: prev, Step: 1},
				{Name: "c2", Phase: rollout.ClusterApplying, Run: events.PurposeApply, Step: 1, Deadline: now},
			}}},
		}
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
		f := observe.New(cfg, repo, st, func() time.Time { return now })
		return f, func() rollout.Rollout {
			ro, err := repo.Get(t.Context(), rolloutID)
			if err != nil {
				t.Fatal(err)
			}
			return ro
		}
	}

	one, readOne := stored(t)
	var wantOut [][]result
	for _, e := range burst(t)[:3] {
		out, err := one.Handle(t.Context(), e)
		if err != nil {
			t.Fatalf("handling %s alone: %v", e.ID(), err)
		}
		wantOut = append(wantOut, results(t, out))
	}

	var types [][]string
	for _, out := range wantOut {
		var ts []string
		for _, r := range out {
			ts = append(ts, r.Type)
		}
		types = append(types, ts)
	}
	if diff := cmp.Diff([][]string{nil, {events.TypeClusterSucceeded}, {events.TypeClusterApplied}}, types); diff != "" {
		t.Fatalf("one at a time emitted (-want +got):\n%s", diff)
	}

	folded, readFolded := stored(t)
	outs, err := folded.HandleFolded(t.Context(), burst(t))
	if err != nil {
		t.Fatal(err)
	}
	var gotOut [][]result
	for _, out := range outs {
		gotOut = append(gotOut, results(t, out))
	}
	if diff := cmp.Diff(wantOut, gotOut, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("emitted, by input (-one at a time +folded):\n%s", diff)
	}
	want, got := readOne(), readFolded()
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(rollout.Rollout{}, "Version", "Updated", "Created")); diff != "" {
		t.Errorf("rollout (-one at a time +folded):\n%s", diff)
	}
	if want.Version != 4 || got.Version != 2 {
		t.Errorf("versions: one at a time %d, folded %d; want 4 (three writes) and 2 (one)", want.Version, got.Version)
	}
}

// A burst's reads of its clusters go out at once, not one after the other
// (a wave of 1,000 clusters read serially kept observe busy for most of
// the wave's start); the burst still stops at the first event whose
// cluster cannot be read, keeping the events before it.
func TestObserveFoldReadsClustersAtOnce(t *testing.T) {
	clusters := []string{"c1", "c2", "c3", "c4"}
	run := func(t *testing.T, failing string) int {
		t.Helper()
		repo := functiontest.NewRepo(t)
		ro := rollout.Rollout{ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: "sha256:new", Phase: rollout.Progressing,
			Waves: []rollout.Wave{{Name: "all"}}}
		var burst []cloudevents.Event
		for _, c := range clusters {
			ro.Waves[0].Clusters = append(ro.Waves[0].Clusters, rollout.Cluster{Name: c, Phase: rollout.ClusterProgressing, PreviousImage: prev, Step: 1})
			e := canaryEvent(t, events.Canary{RolloutID: rolloutID, Cluster: c, Outcome: events.CanaryProgressing, Message: "Advance shop-api.web canary weight 10"})
			e.SetID("p-" + c)
			burst = append(burst, e)
		}
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
		// Every read waits until all four are asked: read one at a time,
		// the first gives up and the burst folds nothing.
		var mu sync.Mutex
		asked := 0
		all := make(chan struct{})
		reader := fakeStatus{canaryStatus: func(ctx context.Context, cluster, _ string, _ config.Workload) (rollout.CanaryStatus, error) {
			mu.Lock()
			if asked++; asked == len(clusters) {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(5 * time.Second):
				return rollout.CanaryStatus{}, errors.New("read alone: the others were not asked meanwhile")
			}
			if cluster == failing {
				return rollout.CanaryStatus{}, errors.New("connection refused")
			}
			return rollout.CanaryStatus{Phase: "Progressing", PrimaryImage: prev, TargetImage: ref, Weight: 10}, nil
		}}
		outs, err := observe.New(cfg, repo, reader, func() time.Time { return now }).HandleFolded(t.Context(), burst)
		if err != nil {
			t.Fatal(err)
		}
		return len(outs)
	}
	for _, tc := range []struct {
		name, failing string
		want          int
	}{
		{"all read", "", 4},
		{"c3 unreadable: c1 and c2 folded, c3 handled alone", "c3", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(t, tc.failing); got != tc.want {
				t.Errorf("events folded: %d, want %d", got, tc.want)
			}
		})
	}
}
