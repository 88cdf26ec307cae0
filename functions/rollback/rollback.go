package rollback

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// StatusReader reads a canary's live state (pkg/cluster.Set, in production).
type StatusReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (rollout.CanaryStatus, error)
}

// statusTimeout bounds one read of a cluster.
const statusTimeout = 10 * time.Second

// Rollouts is the rollout state rollback needs (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	// Phase is the rollout's phase, read without a copy of the rollout.
	Phase(ctx context.Context, id string) (rollout.Phase, error)
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	App(ctx context.Context, name string) (rollout.AppState, error)
}

// Function is the rollback function.
type Function struct {
	cfg    config.Provider
	repo   Rollouts
	status StatusReader
	now    func() time.Time
}

// New returns rollback; now defaults to time.Now.
func New(cfg config.Provider, repo Rollouts, status StatusReader, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, status: status, now: now}
}

func (*Function) Name() string { return "rollback" }
func (*Function) Consumes() []string {
	return []string{
		events.TypeRolloutFailed, events.TypeClusterReverted, events.TypeClusterApplied,
		events.TypePipelineRunFinished, events.TypeClusterDeadline, events.TypeRolloutRetryRequested,
	}
}

// Wants tells the dispatcher which events of the types rollback consumes
// it acts on (pkg/dispatch.Selective): of runs' ends and deadlines, those
// of reverts only. An apply run's end is then observe's alone, which
// folds a wave's burst of them into one update of the rollout.
func (*Function) Wants(e cloudevents.Event) bool {
	switch e.Type() {
	case events.TypePipelineRunFinished:
		r, err := events.Decode[events.PipelineRunFinished](e)
		return err != nil || r.Purpose == events.PurposeRevert
	case events.TypeClusterDeadline:
		d, err := events.Decode[events.ClusterDeadline](e)
		return err != nil || d.Purpose == events.PurposeRevert
	}
	return true
}

// Handle starts, continues or retries the rollback of one rollout.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	var (
		id     string
		mark   func(*rollout.Rollout) ([]cloudevents.Event, error)
		err    error
		prefix []cloudevents.Event
	)
	switch e.Type() {
	case events.TypeRolloutFailed:
		r, err := events.Decode[events.RolloutResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
	case events.TypeClusterReverted:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return nil, err
		}
		id, mark = r.RolloutID, func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
			return nil, ro.MarkReverted(r.Cluster, r.Reason)
		}
	case events.TypeClusterApplied:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
	case events.TypePipelineRunFinished:
		id, mark, prefix, err = f.finished(ctx, e)
	case events.TypeClusterDeadline:
		id, mark, prefix, err = f.deadline(ctx, e)
	case events.TypeRolloutRetryRequested:
		r, err := events.Decode[events.RolloutRetryRequested](e)
		if err != nil {
			return nil, err
		}
		id, mark = r.RolloutID, func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
			return ro.RetryRollback(e, r)
		}
	}
	if err != nil || id == "" {
		return nil, err
	}
	out, err := f.next(ctx, e, id, mark)
	return append(prefix, out...), err
}

// readStatus reads a cluster's canary under statusTimeout, as ro judges
// it: a release set of image members' members' images read as the
// version they make up (rollout.SetStatus).
func (f *Function) readStatus(ctx context.Context, ro rollout.Rollout, clusterName string) (rollout.CanaryStatus, error) {
	cfg := f.cfg.Current()
	app, ok := cfg.Application(ro.Application)
	if !ok {
		return rollout.CanaryStatus{}, fault.Permanent(fmt.Errorf("application %q is no longer configured", ro.Application))
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := f.status.CanaryStatus(ctx, clusterName, app.Namespace, app.Workload)
	if err != nil {
		return st, err
	}
	return ro.SetStatus(cfg, app, clusterName, st), nil
}

// finished handles a revert run's end: failed, the cluster's revert
// failed; applied, the cluster is reverted if it is back on its previous
// image already, else observe reports it when Flagger is done.
func (f *Function) finished(ctx context.Context, e cloudevents.Event) (string, func(*rollout.Rollout) ([]cloudevents.Event, error), []cloudevents.Event, error) {
	run, err := events.Decode[events.PipelineRunFinished](e)
	if err != nil || run.Purpose != events.PurposeRevert {
		return "", nil, nil, err
	}
	ro, err := f.repo.Get(ctx, run.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, err
	}
	var back bool
	if run.Error == "" {
		st, err := f.readStatus(ctx, ro, run.Cluster)
		back = err == nil && st.Back(run.Image)
	}
	mark := func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		return nil, r.RevertRunFinished(run, back, f.now())
	}
	return run.RolloutID, mark, nil, nil
}

// deadline handles a revert's deadline: the cluster is read; back on its
// previous image it is reverted, else its revert failed.
func (f *Function) deadline(ctx context.Context, e cloudevents.Event) (string, func(*rollout.Rollout) ([]cloudevents.Event, error), []cloudevents.Event, error) {
	d, err := events.Decode[events.ClusterDeadline](e)
	if err != nil || d.Purpose != events.PurposeRevert {
		return "", nil, nil, err
	}
	ro, err := f.repo.Get(ctx, d.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, err
	}
	if !ro.RevertWaits(d.Cluster, d.Step) {
		return "", nil, nil, nil // a step done, or a cluster the rollout does not have
	}
	st, readErr := f.readStatus(ctx, ro, d.Cluster)
	mark := func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		return nil, r.RevertExpired(d, st, readErr)
	}
	return d.RolloutID, mark, nil, nil
}

// next reverts the newest wave that still has clusters on the new digest, or
// ends the rollback when none is left and nothing is under way: RolledBack,
// or RollbackFailed when some revert failed. mark, when set, first records
// what the event says, in the same transaction.
func (f *Function) next(ctx context.Context, e cloudevents.Event, id string, mark func(*rollout.Rollout) ([]cloudevents.Event, error)) ([]cloudevents.Event, error) {
	if mark == nil {
		// Nothing to record: nothing to do either unless the rollout
		// failed. A cluster applied while the rollout progresses is not
		// written (nor the rollout copied), which at 1,000 clusters cost
		// more than the wave's start (BENCHMARKS.md, "One wave of 1,000
		// clusters"). A later failure comes as rollout.failed, in order
		// on the rollout's partition.
		p, err := f.repo.Phase(ctx, id)
		if errors.Is(err, rollout.ErrNotFound) || err == nil && p != rollout.Failed {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	ro, err := f.repo.Get(ctx, id)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	app, ok := f.cfg.Current().Application(ro.Application)
	if !ok {
		return nil, fault.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", ro.ID, ro.Application))
	}
	var st rollout.AppState
	if app.GitOps != nil { // only GitOps applications write tags back
		if st, err = f.repo.App(ctx, app.Name); err != nil {
			return nil, err
		}
	}
	g := rollout.Reverts{App: app, PreviousTag: rollout.PreviousTag(app, st), Now: f.now()}
	_, out, err := f.repo.UpdateEmit(ctx, id, func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
		var out []cloudevents.Event
		if mark != nil {
			var err error
			if out, err = mark(ro); err != nil {
				return nil, err
			}
		}
		more, err := ro.Rollback(e, g)
		return append(out, more...), err
	})
	return out, err
}
