package fleetmetrics

import (
	"context"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Names of the metrics an Observation feeds.
const (
	MetricRolloutDuration = "flotilla_rollout_duration_seconds"
	MetricWaveDuration    = "flotilla_wave_duration_seconds"
	MetricClusterResults  = "flotilla_cluster_results_total"
	MetricPushToFleet     = "flotilla_push_to_fleet_seconds"
	MetricReaction        = "flotilla_reaction_seconds"
	MetricRollbacks       = "flotilla_rollbacks_total"
	MetricPruned          = "flotilla_pruned_objects_total"
	MetricTimeToRestore   = "flotilla_time_to_restore_seconds"
)

// Steps of flotilla_reaction_seconds: the latencies `make bench` measures.
const (
	StepPushToFirstApply  = "push_to_first_apply"
	StepWaveToNextWave    = "wave_to_next_wave"
	StepFailureToRollback = "failure_to_rollback"
)

// Results of flotilla_cluster_results_total.
const (
	ResultSucceeded    = "succeeded"
	ResultFailed       = "failed"
	ResultReverted     = "reverted"
	ResultRevertFailed = "revert_failed"
)

// Triggers of flotilla_rollbacks_total.
const (
	TriggerAutomatic = "automatic" // a cluster failed (analysis, pipeline, deadline)
	TriggerUser      = "user"      // an abort, a rollback requested, a version quarantined
)

// Observation is one value for one metric: seconds for a histogram, an
// increment for a counter; Labels are the metric's label values, in the
// order it declares them.
type Observation struct {
	Metric string
	Labels []string
	Value  float64
}

// Rollouts reads the rollout state (pkg/state).
type Rollouts interface {
	// Get returns a rollout, archived ones included.
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	// ListInFlight returns the rollouts not finished.
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
}

// defaultRecent bounds how many recent causes (pushes, Flagger verdicts,
// cluster results, wave starts, ...) the deriver remembers. A cause is
// looked up by the events it causes, which the engine journals soon after
// it: a window of this many events covers a wave of thousands of clusters.
const defaultRecent = 16384

// cause is what the deriver remembers of an event that may cause others:
// its type, and the time its chain started (the root's: the push, the
// Flagger event, the user's control), which reactions are measured from.
type cause struct {
	typ  string
	root string // the type of the chain's first known event
	at   time.Time
}

// recent is a bounded map of causes by event id; the oldest is forgotten
// first.
type recent struct {
	max  int
	byID map[string]cause
	ids  []string // insertion order, a ring
	next int
}

func newRecent(n int) *recent {
	return &recent{max: n, byID: make(map[string]cause, n)}
}

func (r *recent) put(id string, c cause) {
	if _, ok := r.byID[id]; ok {
		r.byID[id] = c
		return
	}
	if len(r.ids) < r.max {
		r.ids = append(r.ids, id)
	} else {
		delete(r.byID, r.ids[r.next])
		r.ids[r.next] = id
		r.next = (r.next + 1) % r.max
	}
	r.byID[id] = c
}

func (r *recent) get(id string) (cause, bool) {
	c, ok := r.byID[id]
	return c, ok
}

// timing is what the deriver keeps of a rollout in flight.
type timing struct {
	app    string
	start  time.Time // started, or queued
	push   time.Time // the push that started it, zero if not seen
	queued bool      // it waited behind another: no push reaction
	// wave is the wave under way and waveStart when it started (zero:
	// not seen by this process).
	wave      int
	waveStart time.Time
	failedAt  time.Time // the failure that started its rollback
	// revertFailed is the step of each cluster counted as revert_failed.
	revertFailed map[string]int
	seen         time.Time // the deriver's clock at its last event
}

// clusterResults are the last result counted for each cluster of a
// rollout: Flagger may report a cluster's end more than once, and observe
// derives a result from each report until advance has recorded the first.
type clusterResults struct {
	last map[string]string
	seen time.Time
}

// deriver turns journaled events into observations. It is not safe for
// concurrent use: one Observer goroutine drives it.
type deriver struct {
	ros      Rollouts
	now      func() time.Time
	recent   *recent
	rollouts map[string]*timing
	results  map[string]*clusterResults
}

func newDeriver(ros Rollouts, now func() time.Time, recentMax int) *deriver {
	if now == nil {
		now = time.Now
	}
	if recentMax <= 0 {
		recentMax = defaultRecent
	}
	return &deriver{ros: ros, now: now, recent: newRecent(recentMax), rollouts: map[string]*timing{}, results: map[string]*clusterResults{}}
}

// causeID is the id of the event e was derived from (events.Derive makes
// "<cause id>/<type>[/<discriminator>]"; the cause's own id may hold the
// same type further up the chain), "" when e was not derived.
func causeID(e cloudevents.Event) string {
	i := strings.LastIndex(e.ID(), "/"+e.Type())
	if i < 0 {
		return ""
	}
	return e.ID()[:i]
}

// remember records e as a cause: its chain starts where its own cause's
// did, when that is known, else at e (at own).
func (d *deriver) remember(e cloudevents.Event, own time.Time) cause {
	c := cause{typ: e.Type(), root: e.Type(), at: own}
	if p, ok := d.recent.get(causeID(e)); ok {
		c.root, c.at = p.root, p.at
	}
	d.recent.put(e.ID(), c)
	return c
}

// userControls are the events by which a user fails a rollout.
var userControls = map[string]bool{
	events.TypeRolloutAbortRequested:      true,
	events.TypeRolloutRollbackRequested:   true,
	events.TypeVersionQuarantineRequested: true,
}

// roots are events that start a chain at their own time: pushes, and the
// controls users send.
var roots = map[string]bool{
	events.TypeImagePushed:                true,
	events.TypeGitPushed:                  true,
	events.TypeRolloutAbortRequested:      true,
	events.TypeRolloutRollbackRequested:   true,
	events.TypeVersionQuarantineRequested: true,
	events.TypeRolloutResumeRequested:     true,
	events.TypeRolloutOverrideRequested:   true,
	events.TypeFleetStartRequested:        true,
	events.TypeWaveApprovalRequested:      true,
}

// timingOf returns the timing of rollout id, reading the rollout's state
// when this process has not seen it start (it started before a restart, or
// is a user's rollback of a finished rollout). It returns nil when the
// rollout cannot be read.
func (d *deriver) timingOf(ctx context.Context, id string) *timing {
	if t, ok := d.rollouts[id]; ok {
		t.seen = d.now()
		return t
	}
	if id == "" || d.ros == nil {
		return nil
	}
	ro, err := d.ros.Get(ctx, id)
	if err != nil {
		return nil
	}
	t := &timing{app: ro.Application, start: ro.Created, wave: -1, seen: d.now()}
	d.rollouts[id] = t
	return t
}

func seconds(from, to time.Time) float64 {
	return max(to.Sub(from).Seconds(), 0)
}

// event derives the observations of one journaled event.
func (d *deriver) event(ctx context.Context, e cloudevents.Event) []Observation {
	switch typ := e.Type(); {
	case roots[typ]:
		d.recent.put(e.ID(), cause{typ: typ, root: typ, at: e.Time()})
	case typ == events.TypeImageVerified, typ == events.TypeGitVerified:
		d.remember(e, e.Time())
	case typ == events.TypeCanary:
		if c, err := events.Decode[events.Canary](e); err == nil && c.Outcome != events.CanaryProgressing {
			d.remember(e, e.Time())
		}
	case typ == events.TypeWaveBaked:
		// The bake's end starts a chain of its own: the next wave reacts
		// to it, not to the wave's last success.
		due, ok := events.Due(e)
		if !ok {
			due = e.Time()
		}
		d.recent.put(e.ID(), cause{typ: typ, root: typ, at: due})
	case typ == events.TypeClusterSucceeded:
		d.remember(e, e.Time())
		return d.clusterResult(e, ResultSucceeded)
	case typ == events.TypeClusterFailed:
		d.remember(e, e.Time())
		return d.clusterResult(e, ResultFailed)
	case typ == events.TypeClusterReverted:
		return d.clusterResult(e, ResultReverted)
	case typ == events.TypeRolloutStarted:
		return d.started(e)
	case typ == events.TypeRolloutQueued:
		d.queued(ctx, e)
	case typ == events.TypeWaveStarted:
		d.waveStarted(ctx, e)
	case typ == events.TypePipelineRunRequested:
		return d.requested(e)
	case typ == events.TypeWaveSucceeded:
		return d.waveSucceeded(ctx, e)
	case typ == events.TypeRolloutFailed:
		return d.failed(ctx, e)
	case typ == events.TypeRolloutSucceeded, typ == events.TypeRolloutRolledBack, typ == events.TypeRolloutSuperseded:
		return d.ended(ctx, e)
	case typ == events.TypeRolloutRollbackFailed:
		return d.rollbackFailed(ctx, e)
	case typ == events.TypeClusterPruned:
		if p, err := events.Decode[events.ClusterPruned](e); err == nil && p.Count > 0 {
			return []Observation{{Metric: MetricPruned, Labels: []string{p.Application, p.Purpose}, Value: float64(p.Count)}}
		}
	}
	return nil
}

// clusterResult counts a cluster's result once per step: a repeat of the
// result it had is not counted; a new run requested for it starts afresh.
func (d *deriver) clusterResult(e cloudevents.Event, result string) []Observation {
	p, err := events.Decode[events.ClusterResult](e)
	if err != nil {
		return nil
	}
	r, ok := d.results[p.RolloutID]
	if !ok {
		r = &clusterResults{last: map[string]string{}}
		d.results[p.RolloutID] = r
	}
	r.seen = d.now()
	if r.last[p.Cluster] == result {
		return nil
	}
	r.last[p.Cluster] = result
	return []Observation{{Metric: MetricClusterResults, Labels: []string{result}, Value: 1}}
}

func (d *deriver) started(e cloudevents.Event) []Observation {
	p, err := events.Decode[events.RolloutStarted](e)
	if err != nil {
		return nil
	}
	t, ok := d.rollouts[p.RolloutID]
	if !ok {
		t = &timing{start: e.Time(), wave: -1}
		d.rollouts[p.RolloutID] = t
		if c, ok := d.recent.get(causeID(e)); ok && (c.root == events.TypeImagePushed || c.root == events.TypeGitPushed) {
			t.push = c.at
		}
	}
	t.app, t.seen = p.Application, d.now()
	return nil
}

func (d *deriver) queued(ctx context.Context, e cloudevents.Event) {
	p, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return
	}
	t := d.timingOf(ctx, p.RolloutID)
	if t == nil {
		return
	}
	t.queued, t.start = true, e.Time()
	if c, ok := d.recent.get(causeID(e)); ok && (c.root == events.TypeImagePushed || c.root == events.TypeGitPushed) {
		t.push = c.at
	}
}

func (d *deriver) waveStarted(ctx context.Context, e cloudevents.Event) {
	p, err := events.Decode[events.WaveStarted](e)
	if err != nil {
		return
	}
	c := d.remember(e, e.Time())
	if p.Wave == 0 && (d.rollouts[p.RolloutID] == nil || d.rollouts[p.RolloutID].queued) {
		// Dequeued, or started before this process: no push to react to.
		c.root = events.TypeWaveStarted
		d.recent.put(e.ID(), c)
	}
	if t := d.timingOf(ctx, p.RolloutID); t != nil {
		t.wave, t.waveStart = p.Wave, e.Time()
	}
}

// requested measures the reactions the benchmark measures: a cluster's
// apply requested in response to its wave's start (from the push for the
// first wave, from the previous wave's end for the others), a revert
// requested in response to the rollout's failure.
func (d *deriver) requested(e cloudevents.Event) []Observation {
	p, err := events.Decode[events.PipelineRunRequested](e)
	if err != nil {
		return nil
	}
	if r, ok := d.results[p.RolloutID]; ok {
		delete(r.last, p.Cluster) // a new step: its result counts
	}
	c, ok := d.recent.get(causeID(e))
	if !ok {
		return nil
	}
	var step string
	switch {
	case p.Purpose == events.PurposeApply && c.typ == events.TypeWaveStarted && p.Wave == 0:
		if c.root != events.TypeImagePushed && c.root != events.TypeGitPushed {
			return nil
		}
		step = StepPushToFirstApply
	case p.Purpose == events.PurposeApply && c.typ == events.TypeWaveStarted:
		step = StepWaveToNextWave
	case p.Purpose == events.PurposeRevert && c.typ == events.TypeRolloutFailed:
		step = StepFailureToRollback
	default:
		return nil
	}
	return []Observation{{Metric: MetricReaction, Labels: []string{step}, Value: seconds(c.at, e.Time())}}
}

func (d *deriver) waveSucceeded(ctx context.Context, e cloudevents.Event) []Observation {
	p, err := events.Decode[events.WaveResult](e)
	if err != nil {
		return nil
	}
	t := d.timingOf(ctx, p.RolloutID)
	if t == nil || t.wave != p.Wave || t.waveStart.IsZero() {
		return nil
	}
	start := t.waveStart
	t.waveStart = time.Time{}
	return []Observation{{Metric: MetricWaveDuration, Labels: []string{t.app, ResultSucceeded}, Value: seconds(start, e.Time())}}
}

func (d *deriver) failed(ctx context.Context, e cloudevents.Event) []Observation {
	p, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return nil
	}
	c := d.remember(e, e.Time())
	t := d.timingOf(ctx, p.RolloutID)
	if t == nil {
		return nil
	}
	t.failedAt = c.at
	trigger := TriggerAutomatic
	if userControls[c.root] {
		trigger = TriggerUser
	}
	out := []Observation{{Metric: MetricRollbacks, Labels: []string{t.app, trigger}, Value: 1}}
	if !t.waveStart.IsZero() {
		out = append(out, Observation{Metric: MetricWaveDuration, Labels: []string{t.app, ResultFailed}, Value: seconds(t.waveStart, e.Time())})
		t.waveStart = time.Time{}
	}
	return out
}

// ended observes a rollout's end and forgets it.
func (d *deriver) ended(ctx context.Context, e cloudevents.Event) []Observation {
	p, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return nil
	}
	t := d.timingOf(ctx, p.RolloutID)
	var reverted []Observation
	if e.Type() == events.TypeRolloutRolledBack {
		reverted = d.revertedUnseen(ctx, p.RolloutID)
	}
	delete(d.rollouts, p.RolloutID)
	delete(d.results, p.RolloutID)
	if t == nil {
		return reverted
	}
	phase, since, metric := rollout.Superseded, time.Time{}, ""
	switch e.Type() {
	case events.TypeRolloutSucceeded:
		phase, since, metric = rollout.Succeeded, t.push, MetricPushToFleet
	case events.TypeRolloutRolledBack:
		phase, since, metric = rollout.RolledBack, t.failedAt, MetricTimeToRestore
	}
	var out []Observation
	if !t.start.IsZero() {
		out = append(out, Observation{Metric: MetricRolloutDuration, Labels: []string{t.app, string(phase)}, Value: seconds(t.start, e.Time())})
	}
	if !since.IsZero() {
		out = append(out, Observation{Metric: metric, Labels: []string{t.app}, Value: seconds(since, e.Time())})
	}
	return append(out, reverted...)
}

// revertedUnseen counts the clusters of a rollout the state has Reverted
// whose revert no cluster.reverted reported: rollback records a revert
// found done at its run's end in the state only.
func (d *deriver) revertedUnseen(ctx context.Context, id string) []Observation {
	if d.ros == nil {
		return nil
	}
	ro, err := d.ros.Get(ctx, id)
	if err != nil {
		return nil
	}
	var out []Observation
	for _, c := range ro.InPhase(rollout.ClusterReverted) {
		if r, ok := d.results[id]; ok && r.last[c.Name] == ResultReverted {
			continue
		}
		out = append(out, Observation{Metric: MetricClusterResults, Labels: []string{ResultReverted}, Value: 1})
	}
	return out
}

// rollbackFailed counts the clusters whose revert failed (the rollback
// records them in the state only). The rollout stays in flight: a user's
// retry may roll it back yet.
func (d *deriver) rollbackFailed(ctx context.Context, e cloudevents.Event) []Observation {
	p, err := events.Decode[events.RolloutResult](e)
	if err != nil || d.ros == nil {
		return nil
	}
	t := d.timingOf(ctx, p.RolloutID)
	ro, err := d.ros.Get(ctx, p.RolloutID)
	if t == nil || err != nil {
		return nil
	}
	if t.revertFailed == nil {
		t.revertFailed = map[string]int{}
	}
	var out []Observation
	for _, c := range ro.InPhase(rollout.ClusterRevertFailed) {
		if step, ok := t.revertFailed[c.Name]; ok && step == c.Step {
			continue
		}
		t.revertFailed[c.Name] = c.Step
		out = append(out, Observation{Metric: MetricClusterResults, Labels: []string{ResultRevertFailed}, Value: 1})
	}
	return out
}

// sweep forgets the timings of rollouts that ended without an event this
// process saw (a queued rollout aborted or superseded before it started),
// keeping those in flight and those seen since `since`.
func (d *deriver) sweep(inFlight []rollout.Rollout, since time.Time) {
	keep := make(map[string]bool, len(inFlight))
	for _, ro := range inFlight {
		keep[ro.ID] = true
	}
	for id, t := range d.rollouts {
		if !keep[id] && t.seen.Before(since) {
			delete(d.rollouts, id)
		}
	}
	for id, r := range d.results {
		if !keep[id] && r.seen.Before(since) {
			delete(d.results, id)
		}
	}
}
