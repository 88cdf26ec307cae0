package rollout

import (
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// The wave state machine: how a rollout moves on after a cluster's result,
// the end of a bake, or a user's control. Every rule returns the events of
// its transition, derived from their cause, so a redelivered cause derives
// the same events (which the journal drops).

// step is one transition event of a rule, a timer when due is set.
type step struct {
	typ     string
	payload any
	due     time.Time
}

// derive turns steps into the events they are, caused by cause.
func (r *Rollout) derive(cause cloudevents.Event, steps ...step) ([]cloudevents.Event, error) {
	out := make([]cloudevents.Event, 0, len(steps))
	for _, s := range steps {
		ev, err := events.Derive(cause, s.typ, r.ID, s.payload)
		if err != nil {
			return nil, err
		}
		if !s.due.IsZero() {
			ev = events.At(ev, s.due)
		}
		out = append(out, ev)
	}
	return out, nil
}

// Record records a cluster's result (succeeded, or failed for res.Reason)
// and reports whether it may move r on (Advance): a result of a rollout
// that ended, of a cluster removed from the fleet, of a wave not started, a late one of a wave that passed
// (unless of a retried cluster under way) changes nothing; a retry's end
// in a wave that passed is recorded, but moves r on only once the last
// wave is done.
func (r *Rollout) Record(res events.ClusterResult, succeeded bool) (bool, error) {
	cl, w, err := r.Cluster(res.Cluster)
	if err != nil {
		return false, fault.Permanent(err)
	}
	if r.Phase != Progressing || w > r.Wave || cl.Phase == ClusterRemoved {
		return false, nil
	}
	if w < r.Wave && cl.Phase != ClusterApplying && cl.Phase != ClusterProgressing {
		return false, nil
	}
	cl.Phase, cl.Message, cl.Failure = ClusterFailed, res.Reason, res.Reason
	if succeeded {
		cl.Phase, cl.Failure = ClusterSucceeded, ""
	}
	if done, _ := r.WaveOutcome(r.Wave); w < r.Wave && !done {
		return false, nil
	}
	return true, nil
}

// EndBake ends the bake of wave w and reports whether it was baking: a
// wave that failed meanwhile, or a repeated timer, ends nothing.
func (r *Rollout) EndBake(w int) bool {
	if w < 0 || w >= len(r.Waves) || !r.Baking(w) {
		return false
	}
	r.Waves[w].Baked = true
	return true
}

// Advance moves r on (Decide) and starts, as far as g lets it (Start), the
// wave the decision starts, in the same change: wave.started announces the
// wave to followers, the runs derive from it. With no application in g (it
// is no longer configured) nothing starts.
func (r *Rollout) Advance(cause cloudevents.Event, g Gates) ([]cloudevents.Event, error) {
	out, err := r.Decide(cause, g.Now)
	if err != nil || g.App.Name == "" {
		return out, err
	}
	for _, ev := range out {
		if ev.Type() == events.TypeWaveStarted {
			runs, err := r.Start(ev, g)
			return append(out, runs...), err
		}
	}
	return out, nil
}

// Decide moves r on from its current wave's outcome and returns the events
// of the transition, none while the wave still runs: the rollout fails
// when the wave's failures exceed its budget; a wave with room starts
// more of its clusters; a finished wave bakes, then succeeds and starts
// the next one, or ends the rollout. A pause holds what has not started
// (Start), not this accounting: a wave that ends while paused is recorded
// done, and the next one is announced, its clusters held until the resume.
func (r *Rollout) Decide(cause cloudevents.Event, now time.Time) ([]cloudevents.Event, error) {
	return r.derive(cause, r.decide(now)...)
}

func (r *Rollout) decide(now time.Time) []step {
	w := r.Wave
	wave := r.Waves[w]
	done, failed := r.WaveOutcome(w)
	if failed > wave.MaxFailures {
		r.Phase = Failed
		r.Reason = fmt.Sprintf("wave %d (%s): %s", w+1, wave.Name, r.FailedIn(w))
		if wave.MaxFailures > 0 {
			r.Reason += fmt.Sprintf(" (more than its failure budget of %d)", wave.MaxFailures)
		}
		return []step{{typ: events.TypeRolloutFailed, payload: events.RolloutResult{RolloutID: r.ID, Reason: r.Reason}}}
	}
	if !done {
		if pending := wave.Pending(); wave.MaxParallel > 0 && len(pending) > 0 && wave.Room() > 0 {
			return []step{r.continued(w, pending)}
		}
		return nil
	}
	if wave.BakeTime > 0 && !wave.Baked {
		if !wave.BakingUntil.IsZero() {
			return nil // baking: the timer or a failure ends it
		}
		until := now.UTC().Add(wave.BakeTime)
		r.Waves[w].BakingUntil = until
		return []step{{typ: events.TypeWaveBaked, payload: events.WaveResult{RolloutID: r.ID, Wave: w}, due: until}}
	}
	if w+1 == len(r.Waves) && r.RetriesUnderWay() {
		return nil // a retried cluster of a wave that passed: the rollout ends with its result
	}
	if failed > 0 {
		note := fmt.Sprintf("wave %d (%s) within its failure budget of %d: %s", w+1, wave.Name, wave.MaxFailures, r.FailedIn(w))
		if r.Reason != "" {
			note = r.Reason + "; " + note
		}
		r.Reason = note
	}
	steps := []step{{typ: events.TypeWaveSucceeded, payload: events.WaveResult{RolloutID: r.ID, Wave: w}}}
	if w+1 < len(r.Waves) {
		r.Wave = w + 1
		var names []string
		for _, c := range r.Waves[r.Wave].Clusters {
			names = append(names, c.Name)
		}
		return append(steps, step{typ: events.TypeWaveStarted, payload: events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: names}})
	}
	r.Phase, r.Waiting = Succeeded, ""
	return append(steps, step{typ: events.TypeRolloutSucceeded, payload: events.RolloutResult{RolloutID: r.ID}})
}

// continued asks that the clusters of wave w start (wave.continued).
func (r *Rollout) continued(w int, clusters []string) step {
	return step{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: w, Clusters: clusters}}
}

// FailedIn says which clusters of wave w failed, and why.
func (r *Rollout) FailedIn(w int) string {
	s := ""
	for _, c := range r.Waves[w].Clusters {
		if c.Phase == ClusterFailed {
			if s != "" {
				s += "; "
			}
			s += fmt.Sprintf("cluster %s failed: %s", c.Name, c.Message)
		}
	}
	return s
}

// MayStart reports whether clusters of r wait to start and may: retried
// ones of waves that passed, or the current wave's within its parallelism.
func (r *Rollout) MayStart() bool {
	find := r.Lookup()
	for _, name := range r.Startable() {
		if _, w, _ := find(name); w < r.Wave || r.Waves[r.Wave].Room() > 0 {
			return true
		}
	}
	return false
}

// Pause holds every cluster of r not started yet, in by's name: those
// rolling out finish, and a failure still fails the rollout. Only a
// rollout queued or in progress pauses.
func (r *Rollout) Pause(by string) {
	if r.Phase == Progressing || r.Phase == Queued {
		r.Paused, r.Waiting = by, "paused by "+by
	}
}

// Resume lifts r's pause: the clusters that wait start, or, when the wave
// ended meanwhile, r moves on (Advance).
func (r *Rollout) Resume(cause cloudevents.Event, g Gates) ([]cloudevents.Event, error) {
	if r.Paused == "" {
		return nil, nil
	}
	r.Paused, r.Waiting = "", ""
	if r.Phase != Progressing {
		return nil, nil
	}
	if r.MayStart() {
		return r.derive(cause, r.continued(r.Wave, r.Startable()))
	}
	return r.Advance(cause, g)
}

// Override lets the current wave of r start through its freeze window, in
// by's name.
func (r *Rollout) Override(cause cloudevents.Event, by string) ([]cloudevents.Event, error) {
	if r.Phase != Progressing {
		return nil, nil
	}
	r.Waves[r.Wave].FreezeOverride = by
	pending := r.Startable()
	if len(pending) == 0 {
		return nil, nil
	}
	return r.derive(cause, r.continued(r.Wave, pending))
}

// Abort ends r in by's name: a queued rollout, which touched nothing, is
// superseded; one in progress fails, and its rollback reverts what it
// touched.
func (r *Rollout) Abort(cause cloudevents.Event, by string) ([]cloudevents.Event, error) {
	reason := "aborted by " + by
	switch r.Phase {
	case Queued:
		r.Phase, r.Reason = Superseded, reason+" before it started"
	case Progressing:
		r.Phase, r.Reason = Failed, reason
		return r.derive(cause, step{typ: events.TypeRolloutFailed, payload: events.RolloutResult{RolloutID: r.ID, Reason: r.Reason}})
	}
	return nil, nil
}

// Approve records approver's approval of wave w of r, once per approver;
// when the current wave has the approvals it needs, its clusters start.
func (r *Rollout) Approve(cause cloudevents.Event, w int, approver string) ([]cloudevents.Event, error) {
	if r.Phase.Done() || w < 0 || w >= len(r.Waves) || slices.Contains(r.Waves[w].Approvers, approver) {
		return nil, nil
	}
	wave := &r.Waves[w]
	before := r.approvalWaiting(w)
	wave.Approvers = append(wave.Approvers, approver)
	if r.Waiting == before { // who approved so far, and how many more
		r.Waiting = ""
		if !wave.Approved() {
			r.Waiting = r.approvalWaiting(w)
		}
	}
	if r.Phase != Progressing || w != r.Wave || !wave.Approved() {
		return nil, nil
	}
	pending := wave.Pending()
	if len(pending) == 0 {
		return nil, nil
	}
	return r.derive(cause, r.continued(w, pending))
}

// Continue asks that the clusters of r waiting to start do (after the line
// started again); a paused rollout, or one with none waiting, asks nothing.
func (r *Rollout) Continue(cause cloudevents.Event) ([]cloudevents.Event, error) {
	if r.Phase != Progressing || r.Paused != "" {
		return nil, nil
	}
	pending := r.Startable()
	if len(pending) == 0 {
		return nil, nil
	}
	return r.derive(cause, r.continued(r.Wave, pending))
}
