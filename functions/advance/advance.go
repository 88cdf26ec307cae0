package advance

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
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
	cfg  config.Provider
	repo Rollouts
	now  func() time.Time
}

// New returns advance over the applications of cfg; now defaults to
// time.Now.
func New(cfg config.Provider, repo Rollouts, now func() time.Time) *Function {
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
		events.TypeRolloutOverrideRequested, events.TypeClustersRemoved}
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
	case events.TypeClustersRemoved:
		return f.removed(ctx, e)
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
		return f.record(r, e, res, fleet)
	})
	if err != nil {
		return nil, err
	}
	return out, f.deployed(ctx, ro)
}

// record records cluster result res (event e) in r and moves r on.
func (f *Function) record(r *rollout.Rollout, e cloudevents.Event, res events.ClusterResult, fleet rollout.FleetState) ([]cloudevents.Event, error) {
	succeeded := e.Type() == events.TypeClusterSucceeded
	moves, err := r.Record(res, succeeded)
	if err != nil {
		return nil, err
	}
	g := rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now())
	var out []cloudevents.Event
	if succeeded {
		// A git application's success asks the executors to prune
		// what its commit no longer renders, committed with it.
		if out, err = r.Prune(e, res.Cluster, g); err != nil {
			return nil, err
		}
	}
	if !moves {
		return out, nil
	}
	next, err := r.Advance(e, g)
	return append(out, next...), err
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
		if !r.EndBake(res.Wave) {
			return nil, nil // failed meanwhile, or a repeated timer
		}
		return r.Advance(e, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
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
		by := pausedBy(c)
		switch e.Type() {
		case events.TypeRolloutPauseRequested:
			r.Pause(by)
			return nil, nil
		case events.TypeRolloutOverrideRequested:
			return r.Override(e, by)
		case events.TypeRolloutResumeRequested:
			return r.Resume(e, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
		}
		return r.Abort(e, by)
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
		return r.Approve(e, a.Wave, a.Approver)
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
		cause := e.Clone()
		cause.SetExtension(events.ExtRolloutID, r.ID)
		evs, err := r.Continue(cause)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// deployed records a succeeded rollout as what the application runs
// (rollout.Deploys, AppState.Deploy). Idempotent, so a redelivery that
// finds the rollout done repeats it.
func (f *Function) deployed(ctx context.Context, ro rollout.Rollout) error {
	if !rollout.Deploys(ro) {
		return nil
	}
	return f.repo.UpdateApp(ctx, ro.Application, func(st *rollout.AppState) error {
		st.Deploy(ro)
		return nil
	})
}

// removed takes clusters that left the fleet out of every rollout in
// flight that has not finished with them (Rollout.RemoveClusters): their
// waves go on with the clusters that remain.
func (f *Function) removed(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	c, err := events.Decode[events.ClustersRemoved](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	ros, err := f.repo.ListInFlight(ctx)
	if err != nil {
		return nil, err
	}
	msg := "removed from the fleet's configuration"
	if c.Source != "" {
		msg += " (" + c.Source + ")"
	}
	msg += " at " + e.Time().UTC().Format(time.RFC3339) + ": its wave goes on with the clusters that remain"
	var out []cloudevents.Event
	for _, ro := range ros {
		if !holdsAny(ro, c.Clusters) {
			continue
		}
		cause := e.Clone()
		cause.SetExtension(events.ExtRolloutID, ro.ID)
		next, evs, err := f.repo.UpdateEmit(ctx, ro.ID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
			_, evs, err := r.RemoveClusters(cause, c.Clusters, msg, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
			return evs, err
		})
		if err != nil {
			return nil, err
		}
		if err := f.deployed(ctx, next); err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// holdsAny tells whether ro has one of the clusters named.
func holdsAny(ro rollout.Rollout, names []string) bool {
	for _, n := range names {
		if _, _, err := ro.Cluster(n); err == nil {
			return true
		}
	}
	return false
}
