package rollout_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/quick"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

var t0 = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// cause is the event a rule's events derive from.
func cause(t *testing.T) cloudevents.Event {
	t.Helper()
	e, err := events.New("cause-1", events.Source, events.TypeClusterSucceeded, events.ClusterResult{RolloutID: "app-1"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// types lists the types of evs, a timer's with its due time.
func types(evs []cloudevents.Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Type()
		if due, ok := events.Due(e); ok {
			s += "@" + due.Format(time.TimeOnly)
		}
		out = append(out, s)
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		rollout   func() *rollout.Rollout
		want      []string
		wantPhase rollout.Phase
		wantWave  int
		wantWhy   string
	}{{
		name: "a wave still running decides nothing",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, ""), cl("c2", rollout.ClusterProgressing, "")})
		},
		wantPhase: rollout.Progressing,
	}, {
		name: "a failure over the budget fails the rollout at once",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterFailed, ""), cl("c2", rollout.ClusterProgressing, "")})
			r.Waves[0].Clusters[0].Message = "canary failed"
			return r
		},
		want:      []string{events.TypeRolloutFailed},
		wantPhase: rollout.Failed,
		wantWhy:   "wave 1 (wave-1): cluster c1 failed: canary failed",
	}, {
		name: "a finished wave within its budget starts the next one",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterFailed, ""), cl("c2", rollout.ClusterSucceeded, "")}, []rollout.Cluster{cl("c3", rollout.ClusterPending, "")})
			r.Waves[0].MaxFailures = 1
			return r
		},
		want:      []string{events.TypeWaveSucceeded, events.TypeWaveStarted},
		wantPhase: rollout.Progressing,
		wantWave:  1,
		wantWhy:   "wave 1 (wave-1) within its failure budget of 1: cluster c1 failed: ",
	}, {
		name: "room in a wave of limited parallelism starts more of it",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, ""), cl("c2", rollout.ClusterPending, "")})
			r.Waves[0].MaxParallel = 1
			return r
		},
		want:      []string{events.TypeWaveContinued},
		wantPhase: rollout.Progressing,
	}, {
		name: "a finished wave with a bake time bakes first",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, "")})
			r.Waves[0].BakeTime = time.Hour
			return r
		},
		want:      []string{events.TypeWaveBaked + "@10:00:00"},
		wantPhase: rollout.Progressing,
	}, {
		name: "the last wave done ends the rollout",
		rollout: func() *rollout.Rollout {
			return waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")})
		},
		want:      []string{events.TypeWaveSucceeded, events.TypeRolloutSucceeded},
		wantPhase: rollout.Succeeded,
	}, {
		name: "the last wave done waits for a retry of a wave that passed",
		rollout: func() *rollout.Rollout {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterApplying, "")}, []rollout.Cluster{cl("c2", rollout.ClusterSucceeded, "")})
			r.Wave = 1
			return r
		},
		wantPhase: rollout.Progressing,
		wantWave:  1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rollout()
			r.Phase = rollout.Progressing
			out, err := r.Decide(cause(t), t0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, types(out)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if r.Phase != tt.wantPhase || r.Wave != tt.wantWave || r.Reason != tt.wantWhy {
				t.Errorf("rollout %s in wave %d (%q), want %s in wave %d (%q)", r.Phase, r.Wave, r.Reason, tt.wantPhase, tt.wantWave, tt.wantWhy)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	tests := []struct {
		name      string
		cluster   string
		wave      int
		phase     rollout.Phase
		wantMoves bool
		wantErr   bool
		wantPhase rollout.ClusterPhase
	}{
		{name: "a result of the current wave moves on", cluster: "c2", wave: 1, phase: rollout.Progressing, wantMoves: true, wantPhase: rollout.ClusterSucceeded},
		{name: "a result of a wave not started is ignored", cluster: "c3", wave: 1, phase: rollout.Progressing, wantPhase: rollout.ClusterPending},
		{name: "a late result of a wave that passed is ignored", cluster: "c1", wave: 1, phase: rollout.Progressing, wantPhase: rollout.ClusterFailed},
		{name: "a result of a rollout that ended is ignored", cluster: "c2", wave: 1, phase: rollout.Failed, wantPhase: rollout.ClusterProgressing},
		{name: "an unknown cluster is a permanent error", cluster: "nope", wave: 1, phase: rollout.Progressing, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := waves([]rollout.Cluster{cl("c1", rollout.ClusterFailed, "")}, []rollout.Cluster{cl("c2", rollout.ClusterProgressing, "")}, []rollout.Cluster{cl("c3", rollout.ClusterPending, "")})
			r.Phase, r.Wave, r.Waves[0].MaxFailures = tt.phase, tt.wave, 1
			moves, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: tt.cluster}, true)
			if (err != nil) != tt.wantErr || moves != tt.wantMoves {
				t.Fatalf("Record = %v, %v; want moves %v, error %v", moves, err, tt.wantMoves, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if c, _, _ := r.Cluster(tt.cluster); c.Phase != tt.wantPhase {
				t.Errorf("cluster %s is %s, want %s", tt.cluster, c.Phase, tt.wantPhase)
			}
		})
	}
}

func TestControls(t *testing.T) {
	progressing := func() *rollout.Rollout {
		r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "")}, []rollout.Cluster{cl("c2", rollout.ClusterPending, ""), cl("c3", rollout.ClusterPending, "")})
		r.Phase, r.Wave = rollout.Progressing, 1
		return r
	}
	app := rollout.Gates{App: config.Application{Name: "app"}, Now: t0}
	tests := []struct {
		name        string
		act         func(*rollout.Rollout, cloudevents.Event) ([]cloudevents.Event, error)
		want        []string
		wantPhase   rollout.Phase
		wantWaiting string
	}{{
		name: "a pause holds the rollout and says so",
		act: func(r *rollout.Rollout, _ cloudevents.Event) ([]cloudevents.Event, error) {
			r.Pause("alice: checking")
			return nil, nil
		},
		wantPhase: rollout.Progressing, wantWaiting: "paused by alice: checking",
	}, {
		name: "resuming starts what waits",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Pause("alice")
			return r.Resume(e, app)
		},
		want: []string{events.TypeWaveContinued}, wantPhase: rollout.Progressing,
	}, {
		name: "resuming a wave that ended meanwhile moves on and starts the next wave's runs",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Wave = 0
			r.Waves[1].Clusters = r.Waves[1].Clusters[:1]
			r.Pause("alice")
			return r.Resume(e, app)
		},
		want:      []string{events.TypeWaveSucceeded, events.TypeWaveStarted, events.TypePipelineRunRequested, events.TypeClusterDeadline + "@09:02:00"},
		wantPhase: rollout.Progressing,
	}, {
		name: "a wave that ends while paused is recorded done; the next one waits and says so",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Wave = 0
			r.Waves[0].Clusters[0].Phase = rollout.ClusterProgressing
			r.Pause("alice: lunch")
			if _, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: "c1"}, true); err != nil {
				return nil, err
			}
			return r.Advance(e, app)
		},
		want:      []string{events.TypeWaveSucceeded, events.TypeWaveStarted},
		wantPhase: rollout.Progressing, wantWaiting: "paused by alice: lunch",
	}, {
		name: "an abort fails a rollout in progress",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			return r.Abort(e, "bob")
		},
		want: []string{events.TypeRolloutFailed}, wantPhase: rollout.Failed,
	}, {
		name: "an abort ends a queued rollout, which touched nothing",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Phase = rollout.Queued
			return r.Abort(e, "bob")
		},
		wantPhase: rollout.Superseded,
	}, {
		name: "an override starts the frozen wave",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			return r.Override(e, "carol")
		},
		want: []string{events.TypeWaveContinued}, wantPhase: rollout.Progressing,
	}, {
		name: "the second approval of a wave needing two starts it, a repeated one does nothing",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Waves[1].Approvals = 2
			for _, who := range []string{"alice", "alice"} {
				if out, err := r.Approve(e, 1, who); len(out) > 0 || err != nil {
					return out, err
				}
			}
			return r.Approve(e, 1, "bob")
		},
		want: []string{events.TypeWaveContinued}, wantPhase: rollout.Progressing,
	}, {
		name: "a paused rollout does not continue when the line starts",
		act: func(r *rollout.Rollout, e cloudevents.Event) ([]cloudevents.Event, error) {
			r.Pause("alice")
			return r.Continue(e)
		},
		wantPhase: rollout.Progressing, wantWaiting: "paused by alice",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := progressing()
			out, err := tt.act(r, cause(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, types(out)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if r.Phase != tt.wantPhase || r.Waiting != tt.wantWaiting {
				t.Errorf("rollout %s waiting %q, want %s waiting %q", r.Phase, r.Waiting, tt.wantPhase, tt.wantWaiting)
			}
		})
	}
}

// The rule the wave state machine keeps whatever the order of the cluster
// results and however often each is delivered: a wave starts only once
// every cluster of the wave before it has finished and no more of them
// failed than its budget; a rollout fails as soon as a wave's failures
// exceed the budget, and never succeeds with a wave over budget.
func TestWaveOrderProperty(t *testing.T) {
	property := func(seed uint64) bool {
		return checkRandomRollout(t, rand.New(rand.NewPCG(seed, seed>>1)))
	}
	if err := quick.Check(property, &quick.Config{MaxCount: 500}); err != nil {
		t.Error(err)
	}
}

func checkRandomRollout(t *testing.T, rng *rand.Rand) bool {
	t.Helper()
	r := &rollout.Rollout{ID: "app-1", Application: "app", Phase: rollout.Progressing}
	type result struct {
		cluster string
		failed  bool
	}
	var results []result
	for w := range 2 + rng.IntN(3) {
		wave := rollout.Wave{Name: fmt.Sprintf("w%d", w)}
		for c := range 1 + rng.IntN(4) {
			n := fmt.Sprintf("w%dc%d", w, c)
			wave.Clusters = append(wave.Clusters, rollout.Cluster{Name: n, Phase: rollout.ClusterProgressing})
			res := result{n, rng.IntN(4) == 0}
			results = append(results, res)
			for rng.IntN(3) == 0 {
				results = append(results, res) // a redelivery
			}
		}
		wave.MaxFailures = rng.IntN(len(wave.Clusters) + 1)
		r.Waves = append(r.Waves, wave)
	}
	rng.Shuffle(len(results), func(i, j int) { results[i], results[j] = results[j], results[i] })
	for _, res := range results {
		before := *r
		moves, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: res.cluster, Reason: "r"}, !res.failed)
		if err != nil {
			t.Fatal(err)
		}
		if moves {
			if _, err := r.Advance(cause(t), rollout.Gates{Now: t0}); err != nil {
				t.Fatal(err)
			}
		}
		if msg := violation(before, *r); msg != "" {
			t.Logf("after the result of %s: %s", res.cluster, msg)
			return false
		}
	}
	return true
}

// violation checks one transition against the rule.
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

// TestFailureOutlivesTheRevert: the cluster whose result failed the wave
// keeps why once reverted; the clusters reverted because of it say
// nothing of a failure, though both end Reverted.
func TestFailureOutlivesTheRevert(t *testing.T) {
	r := waves([]rollout.Cluster{cl("c1", rollout.ClusterSucceeded, "app@sha256:old")}, []rollout.Cluster{cl("c2", rollout.ClusterProgressing, "app@sha256:old")})
	r.Phase, r.Wave = rollout.Progressing, 1
	moves, err := r.Record(events.ClusterResult{RolloutID: r.ID, Cluster: "c2", Reason: "Flagger's analysis failed"}, false)
	if err != nil || !moves {
		t.Fatalf("Record = %v, %v", moves, err)
	}
	if _, err := r.Advance(cause(t), rollout.Gates{Now: t0}); err != nil {
		t.Fatal(err)
	}
	g := rollout.Reverts{PreviousTag: func(string) string { return "" }, Now: t0}
	for range 2 { // newest wave first, then the first
		if _, err := r.Rollback(cause(t), g); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"c1", "c2"} {
			if err := r.MarkReverted(name, "previous image restored"); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := map[string][2]string{}
	for _, w := range r.Waves {
		for _, c := range w.Clusters {
			got[c.Name] = [2]string{string(c.Phase), c.Failure}
		}
	}
	want := map[string][2]string{
		"c1": {"Reverted", ""},
		"c2": {"Reverted", "Flagger's analysis failed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
}
