package rollback

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Function is the rollback function.
type Function struct {
	cfg         *config.Config
	repo        *rollout.Repo
	exec        pipelines.Executor
	status      launch.StatusReader
	hooks       launch.Hooks
	maxParallel int
}

// New returns rollback.
func New(cfg *config.Config, repo *rollout.Repo, exec pipelines.Executor, status launch.StatusReader, hooks launch.Hooks, maxParallel int) *Function {
	if maxParallel <= 0 {
		maxParallel = 16
	}
	return &Function{cfg: cfg, repo: repo, exec: exec, status: status, hooks: hooks, maxParallel: maxParallel}
}

func (*Function) Name() string { return "rollback" }
func (*Function) Consumes() []string {
	return []string{events.TypeRolloutFailed, events.TypeClusterReverted}
}

// Handle starts or continues the rollback of one rollout.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	var id string
	switch e.Type() {
	case events.TypeRolloutFailed:
		r, err := events.Decode[events.RolloutResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
	default:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
		if _, err := f.repo.Update(ctx, id, func(ro *rollout.Rollout) error {
			c, _, err := ro.Cluster(r.Cluster)
			if err != nil {
				return events.Permanent(err)
			}
			if c.Phase == rollout.ClusterReverting {
				c.Phase, c.Message = rollout.ClusterReverted, r.Reason
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return f.next(ctx, e, id)
}

// next reverts the newest wave that still has clusters on the new digest, or
// ends the rollback when none is left and nothing is being reverted.
//
// Clusters are marked Reverting only once their revert is applied: a retry or
// a redelivery after a failed or interrupted apply finds them still to revert
// and applies again (the apply is idempotent), where marking them first would
// leave them waiting for a revert that never happened.
func (f *Function) next(ctx context.Context, e cloudevents.Event, id string) ([]cloudevents.Event, error) {
	var (
		wave    = -1
		targets []string
	)
	// The end of the rollback is journaled with the state change, so a crash
	// cannot leave a rolled-back rollout that never said so.
	ro, out, err := f.repo.UpdateEmit(ctx, id, func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
		wave, targets = -1, nil
		if ro.Phase != rollout.Failed {
			return nil, nil
		}
		for w := range ro.Waves {
			if ro.Reverting(w) {
				return nil, nil // wait for the wave being reverted
			}
		}
		wave = ro.RevertWave(len(ro.Waves) - 1)
		if wave >= 0 {
			targets = ro.ToRevert(wave)
			return nil, nil
		}
		ro.Phase = rollout.RolledBack
		done, err := events.Derive(e, events.TypeRolloutRolledBack, id, events.RolloutResult{RolloutID: id, Reason: ro.Reason})
		if err != nil {
			return nil, err
		}
		return []cloudevents.Event{done}, nil
	})
	if err != nil || len(out) > 0 {
		return out, err
	}
	if wave < 0 {
		return nil, nil
	}
	return f.revert(ctx, e, ro, wave, targets)
}

// previousTag returns, for an image a cluster ran before, its tag when it is
// the digest the fleet last converged on (so a GitOps repository gets the
// version's tag back with its digest), else "".
func (f *Function) previousTag(ctx context.Context, app config.Application) (func(image string) string, error) {
	none := func(string) string { return "" }
	if app.GitOps == nil {
		return none, nil
	}
	st, err := f.repo.App(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	if st.DeployedDigest == "" || st.DeployedTag == "" {
		return none, nil
	}
	return func(image string) string {
		if strings.HasSuffix(image, "@"+st.DeployedDigest) {
			return st.DeployedTag
		}
		return ""
	}, nil
}

// revert gives each named cluster its previous image back. Flagger treats a
// return to the last promoted spec as a manual rollback and reports nothing,
// so a cluster whose primary and workload both run the previous image after
// the apply, with no analysis under way, is reverted at once; the others
// (caught mid-analysis) are reported reverted by observe when Flagger has
// promoted the previous image.
func (f *Function) revert(ctx context.Context, e cloudevents.Event, ro rollout.Rollout, wave int, names []string) ([]cloudevents.Event, error) {
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return nil, events.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", ro.ID, ro.Application))
	}
	prevTag, err := f.previousTag(ctx, app)
	if err != nil {
		return nil, err
	}
	applied := time.Now().UTC()
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.maxParallel)
	var (
		failed   []string
		reverted []string // applied: now Reverting
		out      []cloudevents.Event
	)
	for _, name := range names {
		c, _, _ := ro.Cluster(name)
		prev := c.PreviousImage
		g.Go(func() error {
			objs := canary.Render(app, canary.Input{
				Instance: f.cfg.Server.Instance,
				Cluster:  name, Rollout: ro.ID, Event: f.hooks(name, ro.ID), SkipAnalysis: true,
			})
			deps, err := objs.Dependencies()
			if err != nil {
				err = events.Permanent(fmt.Errorf("rendering the delivery policy: %w", err))
			} else {
				// A GitOps application gets the previous image back in its
				// repository too: else the GitOps agent would re-apply the
				// failed one.
				_, err = pipelines.Apply(gctx, f.exec, name, app, prevTag(prev), tasks.ApplyCanaryParams{
					Rollout:   ro.ID + "-revert",
					Namespace: app.Namespace,
					Kind:      app.Workload.Kind,
					Workload:  app.Workload.Name,
					Container: app.Workload.Container,
					Image:     prev,
					Canary:    objs.Canary,
					Objects:   deps,
				})
			}
			if events.IsPermanent(err) {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("%s: %v", name, err))
				mu.Unlock()
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			reverted = append(reverted, name)
			mu.Unlock()
			st, err := f.status.CanaryStatus(gctx, name, app.Namespace, app.Workload)
			if err != nil || !st.Settled() || st.PrimaryImage != prev || st.TargetImage != prev {
				return nil //nolint:nilerr // Flagger is still at work: observe reports the revert
			}
			ev, err := events.Derive(e, events.TypeClusterReverted, name, events.ClusterResult{
				RolloutID: ro.ID, Wave: wave, Cluster: name, Reason: "previous image restored; Flagger phase " + st.Phase,
			})
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, ev)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("reverting rollout %s: %w", ro.ID, err)
	}
	if len(reverted) > 0 {
		if _, err := f.repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error {
			for _, name := range reverted {
				c, _, err := r.Cluster(name)
				if err != nil {
					return events.Permanent(err)
				}
				c.Phase, c.Applied = rollout.ClusterReverting, applied
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	if len(failed) > 0 {
		return nil, events.Permanent(fmt.Errorf("reverting rollout %s: %v", ro.ID, failed))
	}
	return out, nil
}
