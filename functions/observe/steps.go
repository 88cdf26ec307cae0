package observe

import (
	"context"
	"errors"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// finished records an apply run's end. The cluster took the digest: it
// waits for Flagger (or, when the run changed nothing and the primary
// runs the digest already, it is done). The run failed: so did the
// cluster. A rollout that failed meanwhile hears of the cluster by
// cluster.applied, to revert it.
func (f *Function) finished(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	run, err := events.Decode[events.PipelineRunFinished](e)
	if err != nil || run.Purpose != events.PurposeApply {
		return nil, err
	}
	ro, err := f.repo.Get(ctx, run.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, run.RolloutID, f.finishedChange(ctx, ro, e, run))
	return out, err
}

// finishedChange reads what apply run's end needs of its cluster.
func (f *Function) finishedChange(ctx context.Context, ro rollout.Rollout, e cloudevents.Event, run events.PipelineRunFinished) change {
	// Flagger sees no new revision when nothing changed and will report
	// nothing: read whether the primary runs the digest already (before
	// the transaction: a read may take seconds).
	var already bool
	var jobs []rollout.JobStatus
	if app, ok := f.cfg.Current().Application(ro.Application); ok {
		if run.Error == "" && !run.Changed {
			st, err := f.readStatus(ctx, ro, run.Cluster, app)
			already = err == nil && st.PrimaryImage == ro.Ref()
		}
		jobs = f.readJobs(ctx, run.Cluster, app)
	}
	return func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		r.RecordJobs(run.Cluster, jobs)
		return r.Applied(e, run, already, f.now())
	}
}

// deadline decides a cluster whose step's time is up, from what the
// cluster runs: the primary runs the digest (succeeded), Flagger failed it,
// the run or Flagger never started (failed), or Flagger's analysis is
// still under way (another deadline, up to MaxExtensions).
func (f *Function) deadline(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	d, err := events.Decode[events.ClusterDeadline](e)
	if err != nil || d.Purpose != events.PurposeApply {
		return nil, err
	}
	ro, err := f.repo.Get(ctx, d.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if cl, _, err := ro.Cluster(d.Cluster); err != nil || !ro.Waits(cl, d.Step) {
		return nil, nil //nolint:nilerr // a cluster the rollout no longer has, or a step done
	}
	app, ok := f.cfg.Current().Application(ro.Application)
	if !ok {
		return nil, nil
	}
	st, readErr := f.readStatus(ctx, ro, d.Cluster, app)
	jobs := f.readJobs(ctx, d.Cluster, app)
	next := f.now().Add(app.Delivery.StepDeadline())
	_, out, err := f.repo.UpdateEmit(ctx, d.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		r.RecordJobs(d.Cluster, jobs)
		return r.Expire(e, d, st, readErr, next)
	})
	return out, err
}

// functionFailed records on the rollout an event a function gave up on; a
// pipeline request given up on is answered as a failed run, so the cluster
// fails (or its revert does) instead of waiting for its deadline.
func (f *Function) functionFailed(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	ff, err := events.Decode[events.FunctionFailed](e)
	if err != nil {
		return nil, err
	}
	id := events.RolloutID(e)
	if id == "" {
		return nil, nil // not an event of a rollout: the journal and the logs have it
	}
	var out []cloudevents.Event
	if ff.EventType == events.TypePipelineRunRequested {
		orig, err := events.FailedEvent(ff)
		if err != nil {
			return nil, err
		}
		req, err := events.Decode[events.PipelineRunRequested](orig)
		if err != nil {
			return nil, err
		}
		// The id the runner would have given its answer: if it did
		// answer, the journal keeps the first.
		fin, err := events.Derive(orig, events.TypePipelineRunFinished, "", events.PipelineRunFinished{
			RolloutID: req.RolloutID, Wave: req.Wave, Cluster: req.Cluster, Purpose: req.Purpose,
			Step: req.Step, Image: req.Image, Error: "the pipeline gave up: " + ff.Error,
		})
		if err != nil {
			return nil, err
		}
		fin.SetSubject(req.Cluster)
		out = append(out, fin)
	}
	_, err = f.repo.Update(ctx, id, func(r *rollout.Rollout) error {
		r.RecordFailure(rollout.Failure{
			Function: ff.Function, EventID: ff.EventID, EventType: ff.EventType,
			Error: ff.Error, At: f.now().UTC(), Event: ff.Event,
		}, ff.Subject)
		return nil
	})
	if errors.Is(err, rollout.ErrNotFound) {
		return out, nil
	}
	return out, err
}
