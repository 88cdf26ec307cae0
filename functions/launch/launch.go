package launch

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state launch needs (pkg/state).
type Rollouts interface {
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	Fleet(ctx context.Context) (rollout.FleetState, error)
}

// Function is the launch function.
type Function struct {
	cfg  config.Provider
	repo Rollouts
	now  func() time.Time
}

// New returns launch; now defaults to time.Now.
func New(cfg config.Provider, repo Rollouts, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, now: now}
}

func (*Function) Name() string { return "launch" }
func (*Function) Consumes() []string {
	// Not wave.started: plan and advance start a wave's first clusters
	// with it (it announces the wave to followers).
	return []string{events.TypeWaveContinued, events.TypeRolloutRetryRequested, events.TypePullRequestStatus,
		events.TypeRolloutFailed}
}

// Handle requests a pipeline run and sets a deadline for the clusters of
// the wave still pending, as many as its maxParallel leaves room for, and
// for the clusters a user's retry set back. The requests commit with the
// clusters' move to Applying: a redelivered wave finds them applying and
// asks nothing twice.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	switch e.Type() {
	case events.TypePullRequestStatus:
		return f.pullRequest(ctx, e)
	case events.TypeRolloutFailed:
		return f.closePullRequests(ctx, e)
	}
	var id string
	var retry *events.RolloutRetryRequested
	var wave *events.WaveStarted
	if e.Type() == events.TypeRolloutRetryRequested {
		r, err := events.Decode[events.RolloutRetryRequested](e)
		if err != nil {
			return nil, err
		}
		id, retry = r.RolloutID, &r
	} else {
		w, err := events.Decode[events.WaveStarted](e)
		if err != nil {
			return nil, err
		}
		id, wave = w.RolloutID, &w
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, id, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase != rollout.Progressing || (wave != nil && r.Wave != wave.Wave) {
			return nil, nil // the rollout moved on (failed, superseded): nothing to launch
		}
		if wave != nil {
			find := r.Lookup()
			for _, name := range wave.Clusters {
				if _, _, err := find(name); err != nil {
					return nil, fault.Permanent(err)
				}
			}
		}
		if retry == nil {
			return f.start(e, r, fleet)
		}
		var merge []cloudevents.Event
		if retry.Cluster == "" {
			var err error
			if merge, err = r.RetryMerge(e, retry.Attempt, f.now().UTC()); err != nil {
				return nil, err
			}
		}
		if len(r.Retry(retry.Cluster, retry.Attempt, retry.User)) == 0 {
			if len(merge) > 0 {
				r.Waiting = r.PullRequestWaiting(r.Wave)
			}
			return merge, nil // nothing else failed (or a redelivery), or not in a wave that started
		}
		out, err := f.start(e, r, fleet)
		return append(merge, out...), err
	})
	return out, err
}

// start starts what of r may start now (Rollout.Start).
func (f *Function) start(e cloudevents.Event, r *rollout.Rollout, fleet rollout.FleetState) ([]cloudevents.Event, error) {
	g := rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now())
	if g.App.Name == "" {
		return nil, fault.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", r.ID, r.Application))
	}
	return r.Start(e, g)
}
