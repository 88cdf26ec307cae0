package launch

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/freeze"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state launch needs (pkg/state).
type Rollouts interface {
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	Fleet(ctx context.Context) (rollout.FleetState, error)
}

// Function is the launch function.
type Function struct {
	cfg  *config.Config
	repo Rollouts
	now  func() time.Time
}

// New returns launch; now defaults to time.Now.
func New(cfg *config.Config, repo Rollouts, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, now: now}
}

func (*Function) Name() string { return "launch" }
func (*Function) Consumes() []string {
	return []string{events.TypeWaveStarted, events.TypeWaveContinued}
}

// Handle requests a pipeline run and sets a deadline for the clusters of
// the wave still pending, as many as its maxParallel leaves room for. The
// requests commit with the clusters' move to Applying: a redelivered wave
// finds them applying and asks nothing twice.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	w, err := events.Decode[events.WaveStarted](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, w.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase != rollout.Progressing || r.Wave != w.Wave {
			return nil, nil // the rollout moved on (failed, superseded): nothing to launch
		}
		app, ok := f.cfg.Application(r.Application)
		if !ok {
			return nil, events.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", r.ID, r.Application))
		}
		if r.Waiting = waiting(r, fleet); r.Waiting != "" {
			return nil, nil // resuming, starting the line, approving start them
		}
		if fw, until, ok := freeze.Active(f.cfg.FreezeWindows(app, r.Waves[r.Wave].Name), f.now()); ok && r.Waves[r.Wave].FreezeOverride == "" {
			// Held until the window ends (a timer), or an override.
			r.Waiting = fmt.Sprintf("freeze window %q until %s", fw.Name, until.UTC().Format(time.RFC3339))
			timer, err := events.Derive(e, events.TypeWaveContinued, fmt.Sprintf("freeze/%s/%d", fw.Name, until.Unix()),
				events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: r.Waves[r.Wave].Pending()})
			if err != nil {
				return nil, err
			}
			return []cloudevents.Event{events.At(timer, until)}, nil
		}
		deadline := f.now().UTC().Add(app.Delivery.StepDeadline())
		room := r.Waves[r.Wave].Room()
		var out []cloudevents.Event
		for _, name := range w.Clusters {
			if room == 0 {
				break // the rest starts as these finish (wave.continued)
			}
			c, _, err := r.Cluster(name)
			if err != nil {
				return nil, events.Permanent(err)
			}
			if c.Phase != rollout.ClusterPending {
				continue
			}
			c.Phase = rollout.ClusterApplying
			room--
			evs, err := r.RequestRun(e, c, events.PurposeApply, r.Ref(), r.Tag, deadline)
			if err != nil {
				return nil, err
			}
			out = append(out, evs...)
		}
		return out, nil
	})
	return out, err
}

// waiting says why the clusters of r's current wave may not start now, ""
// if they may.
func waiting(r *rollout.Rollout, fleet rollout.FleetState) string {
	wave := r.Waves[r.Wave]
	switch {
	case fleet.Stopped:
		return fmt.Sprintf("the fleet is stopped (by %s: %s)", fleet.By, fleet.Reason)
	case r.Paused != "":
		return "paused by " + r.Paused
	case !wave.Approved():
		return fmt.Sprintf("wave %d (%s) waits for %d approvals, has %d %v", r.Wave+1, wave.Name, wave.Approvals, len(wave.Approvers), wave.Approvers)
	}
	return ""
}
