package advance

import (
	"context"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state advance needs (pkg/state).
type Rollouts interface {
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	UpdateFleet(ctx context.Context, fn func(*rollout.FleetState) error) error
	Fleet(ctx context.Context) (rollout.FleetState, error)
}

// Function is the advance function.
type Function struct {
	cfg  *config.Config
	repo Rollouts
	now  func() time.Time
}

// New returns advance over the applications of cfg; now defaults to
// time.Now.
func New(cfg *config.Config, repo Rollouts, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, now: now}
}

func (*Function) Name() string { return "advance" }
func (*Function) Consumes() []string {
	return []string{events.TypeClusterSucceeded, events.TypeClusterFailed, events.TypeWaveBaked,
		events.TypeRolloutPauseRequested, events.TypeRolloutResumeRequested, events.TypeRolloutAbortRequested,
		events.TypeFleetStopRequested, events.TypeFleetStartRequested, events.TypeWaveApprovalRequested,
		events.TypeRolloutOverrideRequested}
}

type step struct {
	typ     string
	payload any
	due     time.Time // a timer, when set
}

// Handle records one cluster result, or the end of a wave's bake, and
// moves the rollout on.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	switch e.Type() {
	case events.TypeWaveBaked:
		return f.baked(ctx, e)
	case events.TypeRolloutPauseRequested, events.TypeRolloutResumeRequested, events.TypeRolloutAbortRequested,
		events.TypeRolloutOverrideRequested:
		return f.control(ctx, e)
	case events.TypeFleetStopRequested, events.TypeFleetStartRequested:
		return f.fleet(ctx, e)
	case events.TypeWaveApprovalRequested:
		return f.approve(ctx, e)
	}
	res, err := events.Decode[events.ClusterResult](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	ro, out, err := f.repo.UpdateEmit(ctx, res.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		cl, w, err := r.Cluster(res.Cluster)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if r.Phase != rollout.Progressing || w > r.Wave {
			return nil, nil // a stale event, or one of a wave not started
		}
		if w < r.Wave && cl.Phase != rollout.ClusterApplying && cl.Phase != rollout.ClusterProgressing {
			// A late result of a wave that has passed: only a retried
			// cluster of it (under way) still counts.
			return nil, nil
		}
		switch e.Type() {
		case events.TypeClusterSucceeded:
			cl.Phase = rollout.ClusterSucceeded
		case events.TypeClusterFailed:
			cl.Phase = rollout.ClusterFailed
		}
		cl.Message = res.Reason
		if done, _ := r.WaveOutcome(r.Wave); w < r.Wave && !done {
			// A retry's end in a wave that has passed decides nothing: the
			// wave passed. The rollout may end once the last wave is done.
			return nil, nil
		}
		return f.emitStarting(e, r, decide(r, f.now()), fleet)
	})
	if err != nil {
		return nil, err
	}
	return out, f.deployed(ctx, ro)
}

// emitStarting is emit, and the runs of the wave that steps start, as far
// as it may start (Rollout.Start), in the same transaction: no hop through
// launch (wave.started announces the wave to followers; the runs derive
// from it, as launch's would).
func (f *Function) emitStarting(e cloudevents.Event, r *rollout.Rollout, steps []step, fleet rollout.FleetState) ([]cloudevents.Event, error) {
	out, err := emit(e, r, steps)
	if err != nil {
		return nil, err
	}
	for _, ev := range out {
		if ev.Type() != events.TypeWaveStarted {
			continue
		}
		app, ok := f.cfg.Application(r.Application)
		if !ok {
			break // no longer configured: nothing starts
		}
		runs, err := r.Start(ev, rollout.GatesOf(f.cfg, app, fleet, f.now()))
		if err != nil {
			return nil, err
		}
		return append(out, runs...), nil
	}
	return out, nil
}

// baked ends a wave's bake: the wave stayed within its failure budget, so
// the rollout moves on.
func (f *Function) baked(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	res, err := events.Decode[events.WaveResult](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	ro, out, err := f.repo.UpdateEmit(ctx, res.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if res.Wave < 0 || res.Wave >= len(r.Waves) || !r.Baking(res.Wave) {
			return nil, nil // failed meanwhile, or a repeated timer
		}
		r.Waves[res.Wave].Baked = true
		return f.emitStarting(e, r, decide(r, f.now()), fleet)
	})
	if err != nil {
		return nil, err
	}
	return out, f.deployed(ctx, ro)
}

// control pauses, resumes or aborts a rollout. A pause holds every cluster
// not started yet (those rolling out finish, and a failure still fails
// the rollout); resuming starts them, or moves on if the wave ended
// meanwhile; aborting fails the rollout, whose rollback reverts what it
// touched (a queued rollout, which touched nothing, just ends).
func (f *Function) control(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	c, err := events.Decode[events.Control](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, c.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		switch e.Type() {
		case events.TypeRolloutPauseRequested:
			if r.Phase == rollout.Progressing || r.Phase == rollout.Queued {
				r.Paused = pausedBy(c)
				r.Waiting = "paused by " + r.Paused
			}
			return nil, nil
		case events.TypeRolloutOverrideRequested:
			if r.Phase != rollout.Progressing {
				return nil, nil
			}
			r.Waves[r.Wave].FreezeOverride = pausedBy(c)
			pending := r.Startable()
			if len(pending) == 0 {
				return nil, nil
			}
			return emit(e, r, []step{{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: pending}}})
		case events.TypeRolloutResumeRequested:
			if r.Paused == "" {
				return nil, nil
			}
			r.Paused, r.Waiting = "", ""
			if r.Phase != rollout.Progressing {
				return nil, nil
			}
			if startable(r) {
				return emit(e, r, []step{{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: r.Startable()}}})
			}
			return f.emitStarting(e, r, decide(r, f.now()), fleet)
		}
		reason := "aborted by " + pausedBy(c)
		switch r.Phase {
		case rollout.Queued:
			r.Phase, r.Reason = rollout.Superseded, reason+" before it started"
			return nil, nil
		case rollout.Progressing:
			r.Phase, r.Reason = rollout.Failed, reason
			return emit(e, r, []step{{typ: events.TypeRolloutFailed, payload: events.RolloutResult{RolloutID: r.ID, Reason: r.Reason}}})
		}
		return nil, nil
	})
	return out, err
}

// approve records an approver of a wave (once per approver); when the
// current wave has the approvals it needs, its clusters start.
func (f *Function) approve(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	a, err := events.Decode[events.WaveApproval](e)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, a.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase.Done() || a.Wave < 0 || a.Wave >= len(r.Waves) || slices.Contains(r.Waves[a.Wave].Approvers, a.Approver) {
			return nil, nil
		}
		wave := &r.Waves[a.Wave]
		wave.Approvers = append(wave.Approvers, a.Approver)
		if r.Phase != rollout.Progressing || a.Wave != r.Wave || !wave.Approved() {
			return nil, nil
		}
		pending := wave.Pending()
		if len(pending) == 0 {
			return nil, nil
		}
		return emit(e, r, []step{{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: pending}}})
	})
	return out, err
}

// pausedBy says who sent a control, and why.
func pausedBy(c events.Control) string {
	if c.Reason == "" {
		return c.User
	}
	return c.User + ": " + c.Reason
}

// fleet stops or starts the line. Stopped, no cluster starts a rollout
// (launch holds them); started again, every rollout in flight starts the
// clusters of its wave that wait.
func (f *Function) fleet(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	c, err := events.Decode[events.Control](e)
	if err != nil {
		return nil, err
	}
	stop := e.Type() == events.TypeFleetStopRequested
	if err := f.repo.UpdateFleet(ctx, func(st *rollout.FleetState) error {
		*st = rollout.FleetState{}
		if stop {
			*st = rollout.FleetState{Stopped: true, By: c.User, Reason: c.Reason, At: e.Time().UTC()}
		}
		return nil
	}); err != nil || stop {
		return nil, err
	}
	ros, err := f.repo.ListInFlight(ctx)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	for _, r := range ros {
		if r.Phase != rollout.Progressing || r.Paused != "" {
			continue
		}
		pending := r.Startable()
		if len(pending) == 0 {
			continue
		}
		cause := e.Clone()
		cause.SetExtension(events.ExtRolloutID, r.ID)
		evs, err := emit(cause, &r, []step{{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: pending}}})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// emit derives the events of steps from their cause e.
func emit(e cloudevents.Event, r *rollout.Rollout, steps []step) ([]cloudevents.Event, error) {
	out := make([]cloudevents.Event, 0, len(steps))
	for _, s := range steps {
		ev, err := events.Derive(e, s.typ, r.ID, s.payload)
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

// deployed records a succeeded rollout as what the application runs. An
// unsigned build that stopped before the waves requiring a signature is
// not what the fleet runs: the baseline stays, so the same version, signed
// later, rolls out to the whole fleet.
func (f *Function) deployed(ctx context.Context, ro rollout.Rollout) error {
	if ro.Phase == rollout.Succeeded && ro.StopsBefore == "" {
		// Idempotent, so a redelivery that finds the rollout done repeats it.
		return f.repo.UpdateApp(ctx, ro.Application, func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest, st.DeployedCreated = ro.Tag, ro.Digest, ro.ImageCreated
			return nil
		})
	}
	return nil
}

// decide moves r on after a cluster result in its current wave; it returns the
// events of the transition (none while the wave is still running).
func decide(r *rollout.Rollout, now time.Time) []step {
	w := r.Wave
	wave := r.Waves[w]
	done, failed := r.WaveOutcome(w)
	if failed > wave.MaxFailures {
		r.Phase = rollout.Failed
		r.Reason = fmt.Sprintf("wave %d (%s): %s", w+1, wave.Name, failures(r, w))
		if wave.MaxFailures > 0 {
			r.Reason += fmt.Sprintf(" (more than its failure budget of %d)", wave.MaxFailures)
		}
		return []step{{typ: events.TypeRolloutFailed, payload: events.RolloutResult{RolloutID: r.ID, Reason: r.Reason}}}
	}
	// A pause holds what has not started (Rollout.Start), not the
	// accounting: a wave that ends while paused is recorded done, and the
	// next one is announced, its clusters held until the resume.
	if !done {
		if pending := wave.Pending(); wave.MaxParallel > 0 && len(pending) > 0 && wave.Room() > 0 {
			return []step{{typ: events.TypeWaveContinued, payload: events.WaveStarted{RolloutID: r.ID, Wave: w, Clusters: pending}}}
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
		// A retried cluster of a wave that passed has not finished: the
		// rollout ends with its result.
		return nil
	}
	if failed > 0 {
		note := fmt.Sprintf("wave %d (%s) within its failure budget of %d: %s", w+1, wave.Name, wave.MaxFailures, failures(r, w))
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
	r.Phase, r.Waiting = rollout.Succeeded, ""
	return append(steps, step{typ: events.TypeRolloutSucceeded, payload: events.RolloutResult{RolloutID: r.ID}})
}

// startable reports whether clusters of r wait to start and may: retried
// ones of waves that passed, or the current wave's within its parallelism.
func startable(r *rollout.Rollout) bool {
	for _, name := range r.Startable() {
		if _, w, _ := r.Cluster(name); w < r.Wave || r.Waves[r.Wave].Room() > 0 {
			return true
		}
	}
	return false
}

func failures(r *rollout.Rollout, w int) string {
	s := ""
	for _, c := range r.Waves[w].Clusters {
		if c.Phase == rollout.ClusterFailed {
			if s != "" {
				s += "; "
			}
			s += fmt.Sprintf("cluster %s failed: %s", c.Name, c.Message)
		}
	}
	return s
}
