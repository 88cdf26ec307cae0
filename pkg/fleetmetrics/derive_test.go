package fleetmetrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// fakeRollouts is the state, as a map (function-field fakes are not
// needed: the deriver only reads).
type fakeRollouts map[string]rollout.Rollout

func (f fakeRollouts) Get(_ context.Context, id string) (rollout.Rollout, error) {
	ro, ok := f[id]
	if !ok {
		return ro, fmt.Errorf("rollout %s: %w", id, rollout.ErrNotFound)
	}
	return ro, nil
}

func (f fakeRollouts) ListInFlight(context.Context) ([]rollout.Rollout, error) {
	var out []rollout.Rollout
	for _, ro := range f {
		if !ro.Phase.Done() {
			out = append(out, ro)
		}
	}
	return out, nil
}

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// at is t0 plus ms milliseconds.
func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// chain builds events as the engine does: roots from the intake or the
// API, the others derived from their cause, each at a given time.
type chain struct {
	t   *testing.T
	out []cloudevents.Event
}

func (c *chain) root(id, typ, rolloutID string, payload any, ms int) cloudevents.Event {
	c.t.Helper()
	e, err := events.New(id, "/hooks/test", typ, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	if rolloutID != "" {
		e.SetExtension(events.ExtRolloutID, rolloutID)
	}
	e.SetTime(at(ms))
	c.out = append(c.out, e)
	return e
}

func (c *chain) derive(cause cloudevents.Event, typ, disc, rolloutID string, payload any, ms int) cloudevents.Event {
	c.t.Helper()
	if rolloutID != "" {
		cause = cause.Clone()
		cause.SetExtension(events.ExtRolloutID, rolloutID)
	}
	e, err := events.Derive(cause, typ, disc, payload)
	if err != nil {
		c.t.Fatal(err)
	}
	e.SetTime(at(ms))
	c.out = append(c.out, e)
	return e
}

func (c *chain) timer(cause cloudevents.Event, typ, disc, rolloutID string, payload any, created, due int) cloudevents.Event {
	c.t.Helper()
	e := c.derive(cause, typ, disc, rolloutID, payload, created)
	c.out[len(c.out)-1] = events.At(e, at(due))
	return c.out[len(c.out)-1]
}

const ro1 = "podinfo-1"

// push starts rollout ro1 of podinfo in waves [c1] then [c2, c3]: the push
// at 0 ms, verified at 40, started at 50.
func push(c *chain) (started, wave0 cloudevents.Event) {
	p := c.root("push-1", events.TypeImagePushed, "", events.ImagePushed{Registry: "r", Repository: "podinfo", Tag: "1.1.0"}, 0)
	v := c.derive(p, events.TypeImageVerified, "", "", events.ImageVerified{Image: "r/podinfo", Tag: "1.1.0", Digest: "sha256:1"}, 40)
	started = c.derive(v, events.TypeRolloutStarted, "podinfo", ro1, events.RolloutStarted{RolloutID: ro1, Application: "podinfo", Waves: [][]string{{"c1"}, {"c2", "c3"}}}, 50)
	wave0 = c.derive(v, events.TypeWaveStarted, "podinfo", ro1, events.WaveStarted{RolloutID: ro1, Wave: 0, Clusters: []string{"c1"}}, 50)
	return started, wave0
}

func request(c *chain, cause cloudevents.Event, wave int, cluster, purpose string, ms int) cloudevents.Event {
	return c.derive(cause, events.TypePipelineRunRequested, cluster+"/"+purpose+"/1", ro1,
		events.PipelineRunRequested{RolloutID: ro1, Application: "podinfo", Wave: wave, Cluster: cluster, Purpose: purpose, Step: 1}, ms)
}

// flagger is a Flagger event of ro1's canary in cluster, and the cluster
// result observe derives from it.
func flagger(c *chain, id, cluster string, outcome events.CanaryOutcome, typ string, wave, sent, handled int) cloudevents.Event {
	k := c.root(id, events.TypeCanary, ro1, events.Canary{Cluster: cluster, Outcome: outcome, RolloutID: ro1}, sent)
	return c.derive(k, typ, cluster, ro1, events.ClusterResult{RolloutID: ro1, Wave: wave, Cluster: cluster}, handled)
}

func obs(metric string, v float64, labels ...string) Observation {
	return Observation{Metric: metric, Labels: labels, Value: v}
}

func TestDerive(t *testing.T) {
	tests := []struct {
		name   string
		state  fakeRollouts
		events func(c *chain)
		want   []Observation
	}{{
		name: "a rollout through two waves",
		events: func(c *chain) {
			_, w0 := push(c)
			request(c, w0, 0, "c1", events.PurposeApply, 80)
			ok1 := flagger(c, "flagger-1", "c1", events.CanarySucceeded, events.TypeClusterSucceeded, 0, 10_000, 10_030)
			c.derive(ok1, events.TypeWaveSucceeded, ro1, ro1, events.WaveResult{RolloutID: ro1, Wave: 0}, 10_040)
			w1 := c.derive(ok1, events.TypeWaveStarted, ro1, ro1, events.WaveStarted{RolloutID: ro1, Wave: 1, Clusters: []string{"c2", "c3"}}, 10_040)
			request(c, w1, 1, "c2", events.PurposeApply, 10_060)
			request(c, w1, 1, "c3", events.PurposeApply, 10_090)
			flagger(c, "flagger-2", "c2", events.CanarySucceeded, events.TypeClusterSucceeded, 1, 20_000, 20_010)
			ok3 := flagger(c, "flagger-3", "c3", events.CanaryInitialized, events.TypeClusterSucceeded, 1, 21_000, 21_010)
			c.derive(ok3, events.TypeWaveSucceeded, ro1, ro1, events.WaveResult{RolloutID: ro1, Wave: 1}, 21_020)
			c.derive(ok3, events.TypeRolloutSucceeded, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 21_020)
		},
		want: []Observation{
			obs(MetricReaction, 0.08, StepPushToFirstApply),
			obs(MetricClusterResults, 1, ResultSucceeded),
			obs(MetricWaveDuration, 9.99, "podinfo", ResultSucceeded),
			obs(MetricReaction, 0.06, StepWaveToNextWave),
			obs(MetricReaction, 0.09, StepWaveToNextWave),
			obs(MetricClusterResults, 1, ResultSucceeded),
			obs(MetricClusterResults, 1, ResultSucceeded),
			obs(MetricWaveDuration, 10.98, "podinfo", ResultSucceeded),
			obs(MetricRolloutDuration, 20.97, "podinfo", "Succeeded"),
			obs(MetricPushToFleet, 21.02, "podinfo"),
		},
	}, {
		name: "objects pruned after a success and by a revert count by purpose; an empty prune counts nothing",
		events: func(c *chain) {
			c.root("prune/1", events.TypeClusterPruned, ro1, events.ClusterPruned{RolloutID: ro1, Application: "podinfo", Cluster: "c1",
				Purpose: events.PurposePrune, Objects: []string{"ConfigMap/default/a", "ConfigMap/default/b"}, Count: 2}, 1_000)
			c.root("prune/2", events.TypeClusterPruned, ro1, events.ClusterPruned{RolloutID: ro1, Application: "podinfo", Cluster: "c2",
				Purpose: events.PurposeRevert, Objects: []string{"ConfigMap/default/new"}, Count: 1}, 2_000)
			c.root("prune/3", events.TypeClusterPruned, ro1, events.ClusterPruned{RolloutID: ro1, Application: "podinfo", Cluster: "c3",
				Purpose: events.PurposePrune}, 3_000)
		},
		want: []Observation{
			obs(MetricPruned, 2, "podinfo", events.PurposePrune),
			obs(MetricPruned, 1, "podinfo", events.PurposeRevert),
		},
	}, {
		name: "a cluster's result reported twice counts once; after a new run, again",
		events: func(c *chain) {
			flagger(c, "flagger-1", "c1", events.CanaryFailed, events.TypeClusterFailed, 0, 1_000, 1_010)
			flagger(c, "flagger-2", "c1", events.CanaryFailed, events.TypeClusterFailed, 0, 1_001, 1_020)
			retry := c.root("retry/"+ro1+"/1", events.TypeRolloutRetryRequested, ro1, events.RolloutRetryRequested{RolloutID: ro1, Attempt: 1}, 5_000)
			request(c, retry, 0, "c1", events.PurposeApply, 5_010)
			flagger(c, "flagger-3", "c1", events.CanaryFailed, events.TypeClusterFailed, 0, 9_000, 9_010)
		},
		want: []Observation{
			obs(MetricClusterResults, 1, ResultFailed),
			obs(MetricClusterResults, 1, ResultFailed),
		},
	}, {
		name: "a wave that bakes: the next wave reacts to the bake's end",
		events: func(c *chain) {
			_, w0 := push(c)
			ok1 := flagger(c, "flagger-1", "c1", events.CanarySucceeded, events.TypeClusterSucceeded, 0, 10_000, 10_030)
			baked := c.timer(ok1, events.TypeWaveBaked, ro1, ro1, events.WaveResult{RolloutID: ro1, Wave: 0}, 10_040, 70_040)
			w1 := c.derive(baked, events.TypeWaveStarted, ro1, ro1, events.WaveStarted{RolloutID: ro1, Wave: 1}, 70_100)
			request(c, w1, 1, "c2", events.PurposeApply, 70_150)
			_ = w0
		},
		want: []Observation{
			obs(MetricClusterResults, 1, ResultSucceeded),
			obs(MetricReaction, 0.11, StepWaveToNextWave),
		},
	}, {
		name: "a failed gate rolls the rollout back, newest wave first",
		// c1's revert was found done at its run's end: the state says so,
		// no cluster.reverted does.
		state: fakeRollouts{ro1: {ID: ro1, Application: "podinfo", Phase: rollout.RolledBack, Waves: []rollout.Wave{
			{Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterReverted}}},
			{Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterReverted}, {Name: "c3", Phase: rollout.ClusterReverted}}},
		}}},
		events: func(c *chain) {
			_, w0 := push(c)
			request(c, w0, 0, "c1", events.PurposeApply, 70)
			ok1 := flagger(c, "flagger-1", "c1", events.CanarySucceeded, events.TypeClusterSucceeded, 0, 10_000, 10_030)
			w1 := c.derive(ok1, events.TypeWaveStarted, ro1, ro1, events.WaveStarted{RolloutID: ro1, Wave: 1, Clusters: []string{"c2", "c3"}}, 10_040)
			request(c, w1, 1, "c2", events.PurposeApply, 10_050)
			request(c, w1, 1, "c3", events.PurposeApply, 10_050)
			bad := flagger(c, "flagger-2", "c2", events.CanaryFailed, events.TypeClusterFailed, 1, 30_000, 30_100)
			failed := c.derive(bad, events.TypeRolloutFailed, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 30_110)
			request(c, failed, 1, "c2", events.PurposeRevert, 30_200)
			request(c, failed, 1, "c3", events.PurposeRevert, 30_300)
			back := c.derive(failed, events.TypeClusterReverted, "c2", ro1, events.ClusterResult{RolloutID: ro1, Cluster: "c2"}, 40_000)
			c.derive(failed, events.TypeClusterReverted, "c3", ro1, events.ClusterResult{RolloutID: ro1, Cluster: "c3"}, 40_100)
			// Wave 0's revert follows wave 1's: no reaction of flotilla's.
			request(c, back, 0, "c1", events.PurposeRevert, 40_200)
			fin := c.root("run-c1", events.TypePipelineRunFinished, ro1, events.PipelineRunFinished{RolloutID: ro1, Cluster: "c1", Purpose: events.PurposeRevert}, 50_000)
			c.derive(fin, events.TypeRolloutRolledBack, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 50_000)
		},
		want: []Observation{
			obs(MetricReaction, 0.07, StepPushToFirstApply),
			obs(MetricClusterResults, 1, ResultSucceeded),
			obs(MetricReaction, 0.05, StepWaveToNextWave),
			obs(MetricReaction, 0.05, StepWaveToNextWave),
			obs(MetricClusterResults, 1, ResultFailed),
			obs(MetricRollbacks, 1, "podinfo", TriggerAutomatic),
			obs(MetricWaveDuration, 20.07, "podinfo", ResultFailed),
			obs(MetricReaction, 0.2, StepFailureToRollback),
			obs(MetricReaction, 0.3, StepFailureToRollback),
			obs(MetricClusterResults, 1, ResultReverted),
			obs(MetricClusterResults, 1, ResultReverted),
			obs(MetricRolloutDuration, 49.95, "podinfo", "RolledBack"),
			obs(MetricTimeToRestore, 20, "podinfo"),
			obs(MetricClusterResults, 1, ResultReverted), // c1, from the state
		},
	}, {
		name:  "a user's rollback of a rollout finished before (its state read)",
		state: fakeRollouts{"rollback-" + ro1: {ID: "rollback-" + ro1, Application: "podinfo", Phase: rollout.Failed, Created: at(1_000)}},
		events: func(c *chain) {
			req := c.root("control/rollback/1", events.TypeRolloutRollbackRequested, ro1, events.Control{RolloutID: ro1, User: "alice"}, 1_000)
			failed := c.derive(req, events.TypeRolloutFailed, "rollback-"+ro1, "rollback-"+ro1, events.RolloutResult{RolloutID: "rollback-" + ro1}, 1_050)
			c.derive(failed, events.TypePipelineRunRequested, "c3/revert/1", "rollback-"+ro1,
				events.PipelineRunRequested{RolloutID: "rollback-" + ro1, Wave: 1, Cluster: "c3", Purpose: events.PurposeRevert, Step: 1}, 1_090)
			c.derive(failed, events.TypeRolloutRolledBack, "rollback-"+ro1, "rollback-"+ro1, events.RolloutResult{RolloutID: "rollback-" + ro1}, 9_000)
		},
		want: []Observation{
			obs(MetricRollbacks, 1, "podinfo", TriggerUser),
			obs(MetricReaction, 0.09, StepFailureToRollback),
			obs(MetricRolloutDuration, 8, "podinfo", "RolledBack"),
			obs(MetricTimeToRestore, 8, "podinfo"),
		},
	}, {
		name:  "a queued rollout: lead time from its push, no push reaction",
		state: fakeRollouts{ro1: {ID: ro1, Application: "podinfo", Phase: rollout.Queued, Created: at(45)}},
		events: func(c *chain) {
			p := c.root("push-1", events.TypeImagePushed, "", events.ImagePushed{}, 0)
			v := c.derive(p, events.TypeImageVerified, "", "", events.ImageVerified{}, 40)
			c.derive(v, events.TypeRolloutQueued, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 50)
			other := c.root("other-end", events.TypeRolloutSucceeded, "other", events.RolloutResult{RolloutID: "other"}, 60_000)
			c.derive(other, events.TypeRolloutStarted, "podinfo", ro1, events.RolloutStarted{RolloutID: ro1, Application: "podinfo"}, 60_010)
			w0 := c.derive(other, events.TypeWaveStarted, "podinfo", ro1, events.WaveStarted{RolloutID: ro1, Wave: 0}, 60_010)
			request(c, w0, 0, "c1", events.PurposeApply, 60_020)
			c.derive(w0, events.TypeRolloutSucceeded, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 90_000)
		},
		want: []Observation{
			obs(MetricRolloutDuration, 89.95, "podinfo", "Succeeded"),
			obs(MetricPushToFleet, 90, "podinfo"),
		},
	}, {
		name:  "a rollout that started before a restart: duration from its state, no lead time",
		state: fakeRollouts{ro1: {ID: ro1, Application: "podinfo", Phase: rollout.Progressing, Created: at(0)}},
		events: func(c *chain) {
			k := c.root("flagger-9", events.TypeCanary, ro1, events.Canary{Outcome: events.CanarySucceeded}, 5_000)
			c.derive(k, events.TypeRolloutSucceeded, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 5_010)
		},
		want: []Observation{obs(MetricRolloutDuration, 5.01, "podinfo", "Succeeded")},
	}, {
		name: "a rollback that failed counts each failed revert once",
		state: fakeRollouts{ro1: {ID: ro1, Application: "podinfo", Phase: rollout.RollbackFailed, Waves: []rollout.Wave{{Clusters: []rollout.Cluster{
			{Name: "c1", Phase: rollout.ClusterReverted}, {Name: "c2", Phase: rollout.ClusterRevertFailed, Step: 2},
		}}}}},
		events: func(c *chain) {
			k := c.root("deadline-1", events.TypeClusterDeadline, ro1, events.ClusterDeadline{}, 1_000)
			c.derive(k, events.TypeRolloutRollbackFailed, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 1_000)
			k = c.root("deadline-2", events.TypeClusterDeadline, ro1, events.ClusterDeadline{}, 2_000)
			c.derive(k, events.TypeRolloutRollbackFailed, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 2_000)
		},
		want: []Observation{obs(MetricClusterResults, 1, ResultRevertFailed)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &chain{t: t}
			tt.events(c)
			d := newDeriver(tt.state, func() time.Time { return t0 }, 0)
			var got []Observation
			for _, e := range c.out {
				got = append(got, d.event(t.Context(), e)...)
			}
			round := cmp.Transformer("ms", func(o Observation) Observation {
				o.Value = float64(time.Duration(o.Value * float64(time.Second)).Round(time.Millisecond).Milliseconds())
				return o
			})
			if diff := cmp.Diff(tt.want, got, round); diff != "" {
				t.Errorf("observations (-want +got):\n%s", diff)
			}
		})
	}
}

// Ended rollouts are forgotten; so are those that ended unseen, at a sweep.
func TestDeriveForgets(t *testing.T) {
	c := &chain{t: t}
	started, _ := push(c)
	flagger(c, "flagger-1", "c1", events.CanarySucceeded, events.TypeClusterSucceeded, 0, 500, 510)
	c.derive(started, events.TypeRolloutSucceeded, ro1, ro1, events.RolloutResult{RolloutID: ro1}, 1_000)
	c.root("q", events.TypeRolloutStarted, "queued-1", events.RolloutStarted{RolloutID: "queued-1", Application: "podinfo"}, 2_000)
	now := t0
	d := newDeriver(fakeRollouts{}, func() time.Time { return now }, 0)
	for _, e := range c.out {
		d.event(t.Context(), e)
	}
	if _, ok := d.rollouts[ro1]; ok {
		t.Errorf("%s: still remembered after it succeeded", ro1)
	}
	if _, ok := d.results[ro1]; ok {
		t.Errorf("%s: cluster results still remembered after it succeeded", ro1)
	}
	if _, ok := d.rollouts["queued-1"]; !ok {
		t.Fatal("queued-1: not remembered while in flight")
	}
	d.sweep(nil, now) // seen at now: kept
	if _, ok := d.rollouts["queued-1"]; !ok {
		t.Fatal("queued-1: swept although seen since the sweep's list")
	}
	now = now.Add(time.Hour)
	d.sweep(nil, now)
	if len(d.rollouts) != 0 {
		t.Errorf("after a sweep with none in flight, %d rollouts remembered", len(d.rollouts))
	}
}

func TestRecentIsBounded(t *testing.T) {
	r := newRecent(3)
	for i := range 10 {
		r.put(fmt.Sprint(i), cause{typ: "t", at: at(i)})
	}
	if len(r.byID) != 3 || len(r.ids) != 3 {
		t.Fatalf("recent holds %d (%d ids), want 3", len(r.byID), len(r.ids))
	}
	for i, want := range map[int]bool{6: false, 7: true, 8: true, 9: true} {
		if _, ok := r.get(fmt.Sprint(i)); ok != want {
			t.Errorf("get(%d) = %v, want %v", i, ok, want)
		}
	}
}

func TestCauseID(t *testing.T) {
	e, _ := events.New("a/dev.flotilla.pipelinerun.requested.v1/c1/apply/1/dev.flotilla.rollout.failed.v1/r", events.Source, events.TypeRolloutFailed, nil)
	req, _ := events.Derive(e, events.TypePipelineRunRequested, "c1/revert/2", nil)
	if got, want := causeID(req), e.ID(); got != want {
		t.Errorf("causeID = %q, want %q", got, want)
	}
	root, _ := events.New("push-1", "/hooks/r", events.TypeImagePushed, nil)
	if got := causeID(root); got != "" {
		t.Errorf("causeID of a root = %q, want none", got)
	}
}
