package launch

import (
	"context"
	"fmt"
	"strings"
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
	return []string{events.TypeWaveStarted, events.TypeWaveContinued, events.TypeRolloutRetryRequested, events.TypePullRequestStatus,
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
			for _, name := range wave.Clusters {
				if _, _, err := r.Cluster(name); err != nil {
					return nil, events.Permanent(err)
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
				r.Waiting = waitingFor(r, r.Wave)
			}
			return merge, nil // nothing else failed (or a redelivery), or not in a wave that started
		}
		out, err := f.start(e, r, fleet)
		return append(merge, out...), err
	})
	return out, err
}

// start starts what of r may start now (Rollout.Startable), unless
// something holds it: the stopped line or a pause hold the whole rollout,
// an approval or a freeze window the clusters of its wave (r.Waiting says
// what holds them).
func (f *Function) start(e cloudevents.Event, r *rollout.Rollout, fleet rollout.FleetState) ([]cloudevents.Event, error) {
	app, ok := f.cfg.Application(r.Application)
	if !ok {
		return nil, events.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", r.ID, r.Application))
	}
	if r.Waiting = waiting(r, fleet); r.Waiting != "" {
		return nil, nil // resuming, starting the line start them
	}
	deadline := f.now().UTC().Add(app.Delivery.StepDeadline())
	room := r.Waves[r.Wave].Room()
	held := map[int]bool{}
	var out []cloudevents.Event
	for _, name := range r.Startable() {
		c, w, err := r.Cluster(name)
		if err != nil {
			return nil, events.Permanent(err)
		}
		if _, seen := held[w]; !seen {
			why, timer, err := f.gate(e, r, app, w)
			if err != nil {
				return nil, err
			}
			held[w] = why != ""
			if why != "" && r.Waiting == "" {
				r.Waiting = why
			}
			out = append(out, timer...)
		}
		if held[w] {
			continue
		}
		if w == r.Wave {
			if room == 0 {
				continue // the rest starts as these finish (wave.continued)
			}
			room--
		}
		c.Phase = rollout.ClusterApplying
		evs, err := r.RequestRun(e, c, events.PurposeApply, r.Ref(), r.Tag, deadline)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// gate says why the clusters of wave w of r may not start now ("" if they
// may): the approvals the wave needs, or a freeze window, which a timer at
// its end releases (approving or an override start them earlier).
func (f *Function) gate(e cloudevents.Event, r *rollout.Rollout, app config.Application, w int) (string, []cloudevents.Event, error) {
	wave := r.Waves[w]
	if !wave.Approved() {
		return fmt.Sprintf("wave %d (%s) waits for %s", w+1, wave.Name, approvalsWanted(wave)), nil, nil
	}
	fw, until, ok := freeze.Active(f.cfg.FreezeWindows(app, wave.Name), f.now())
	if !ok || wave.FreezeOverride != "" {
		return f.pullRequestGate(e, r, app, w)
	}
	timer, err := events.Derive(e, events.TypeWaveContinued, fmt.Sprintf("freeze/%s/%d", fw.Name, until.Unix()),
		events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: r.Startable()})
	if err != nil {
		return "", nil, err
	}
	return fmt.Sprintf("freeze window %q until %s", fw.Name, until.UTC().Format(time.RFC3339)), []cloudevents.Event{events.At(timer, until)}, nil
}

// waiting says why no cluster of r may start now, "" if they may.
func waiting(r *rollout.Rollout, fleet rollout.FleetState) string {
	switch {
	case fleet.Stopped:
		return fmt.Sprintf("the fleet is stopped (by %s: %s)", fleet.By, fleet.Reason)
	case r.Paused != "":
		return "paused by " + r.Paused
	}
	return ""
}

// approvalsWanted says what approvals a wave waits for: "1 approval, has
// none", "2 approvals, has 1 (alice)".
func approvalsWanted(w rollout.Wave) string {
	want := fmt.Sprintf("%d approval", w.Approvals)
	if w.Approvals != 1 {
		want += "s"
	}
	if len(w.Approvers) == 0 {
		return want + ", has none"
	}
	return fmt.Sprintf("%s, has %d (%s)", want, len(w.Approvers), strings.Join(w.Approvers, ", "))
}
