package observe

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// MaxExtensions bounds the deadlines a cluster's step gets beyond its
// first while Flagger's analysis is under way.
const MaxExtensions = 3

// result derives a cluster result of ro from e.
func result(e cloudevents.Event, typ string, ro *rollout.Rollout, clusterName, reason string) (cloudevents.Event, error) {
	_, wave, _ := ro.Cluster(clusterName)
	out, err := events.Derive(e, typ, clusterName, events.ClusterResult{RolloutID: ro.ID, Wave: wave, Cluster: clusterName, Reason: reason})
	out.SetSubject(clusterName)
	return out, err
}

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
	// Flagger sees no new revision when nothing changed and will report
	// nothing: read whether the primary runs the digest already (before
	// the transaction: a read may take seconds).
	var already bool
	if app, ok := f.cfg.Application(ro.Application); ok && run.Error == "" && !run.Changed {
		st, err := f.readStatus(ctx, run.Cluster, app)
		already = err == nil && st.PrimaryImage == ro.Ref()
	}
	_, out, err := f.repo.UpdateEmit(ctx, run.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		cl, _, err := r.Cluster(run.Cluster)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if cl.Step != run.Step || cl.Run != events.PurposeApply {
			return nil, nil // an earlier step's answer, or one handled already
		}
		cl.Run = ""
		if run.Error != "" {
			cl.Message = run.Error
			if r.Phase != rollout.Progressing {
				cl.Phase = rollout.ClusterFailed
				ev, err := result(e, events.TypeClusterApplied, r, cl.Name, run.Error)
				return []cloudevents.Event{ev}, err
			}
			ev, err := result(e, events.TypeClusterFailed, r, cl.Name, run.Error)
			return []cloudevents.Event{ev}, err
		}
		if cl.PreviousImage == "" {
			cl.PreviousImage = run.PreviousImage
		}
		cl.Applied = f.now().UTC()
		if cl.Phase == rollout.ClusterApplying {
			cl.Phase = rollout.ClusterProgressing
		}
		typ, reason := events.TypeClusterApplied, ""
		if already && r.Phase == rollout.Progressing {
			typ, reason = events.TypeClusterSucceeded, "already running "+r.Ref()
		}
		ev, err := result(e, typ, r, cl.Name, reason)
		return []cloudevents.Event{ev}, err
	})
	return out, err
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
	if cl, _, err := ro.Cluster(d.Cluster); err != nil || !waiting(&ro, cl, d.Step) {
		return nil, nil //nolint:nilerr // a cluster the rollout no longer has, or a step done
	}
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return nil, nil
	}
	st, readErr := f.readStatus(ctx, d.Cluster, app)
	_, out, err := f.repo.UpdateEmit(ctx, d.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		cl, _, err := r.Cluster(d.Cluster)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if !waiting(r, cl, d.Step) {
			return nil, nil
		}
		typ, reason := judge(r, cl, st, readErr)
		if typ == "" && d.Extension < MaxExtensions {
			// Still progressing: record where it is, and look again.
			cl.CanaryPhase, cl.CanaryWeight = st.Phase, st.Weight
			cl.Deadline = f.now().UTC().Add(app.Delivery.StepDeadline())
			next := d
			next.Extension++
			ev, err := events.Derive(e, events.TypeClusterDeadline, fmt.Sprintf("extension/%d", next.Extension), next)
			ev.SetSubject(d.Cluster)
			return []cloudevents.Event{events.At(ev, cl.Deadline)}, err
		}
		if typ == "" {
			typ, reason = events.TypeClusterFailed, fmt.Sprintf("still %s at weight %d after %d more deadlines", st.Phase, st.Weight, MaxExtensions)
		}
		if typ == events.TypeClusterFailed {
			reason = fmt.Sprintf("no result by its deadline (%s): %s", cl.Deadline.Format(time.RFC3339), reason)
		}
		cl.Message = reason
		ev, err := result(e, typ, r, cl.Name, reason)
		return []cloudevents.Event{ev}, err
	})
	return out, err
}

// waiting tells whether cluster cl of r still waits for step's outcome.
func waiting(r *rollout.Rollout, cl *rollout.Cluster, step int) bool {
	return r.Phase == rollout.Progressing && cl.Step == step &&
		(cl.Phase == rollout.ClusterApplying || cl.Phase == rollout.ClusterProgressing)
}

// judge decides a cluster at its deadline from its status: a result type
// and its reason, or "" while Flagger's analysis is under way.
func judge(r *rollout.Rollout, cl *rollout.Cluster, st rollout.CanaryStatus, readErr error) (typ, reason string) {
	switch {
	case readErr != nil:
		return events.TypeClusterFailed, "the cluster cannot be read: " + readErr.Error()
	case st.PrimaryImage == r.Ref() && st.Settled():
		return events.TypeClusterSucceeded, "the primary runs " + r.Ref() + " (read at the deadline)"
	case st.Phase == "Failed":
		return events.TypeClusterFailed, "Flagger's analysis failed"
	case cl.Run != "":
		return events.TypeClusterFailed, "its pipeline run is still not done"
	case st.TargetImage != r.Ref():
		return events.TypeClusterFailed, fmt.Sprintf("the workload runs %s, not %s", st.TargetImage, r.Ref())
	case !st.Settled():
		// Flagger is at work; its own progress deadline fails a canary
		// that is stuck.
		return "", ""
	}
	return events.TypeClusterFailed, fmt.Sprintf("Flagger has not taken up the new revision (phase %q)", st.Phase)
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
		for _, x := range r.Failures {
			if x.EventID == ff.EventID && x.Function == ff.Function && !x.Retried {
				return nil // recorded already
			}
		}
		x := rollout.Failure{
			Function: ff.Function, EventID: ff.EventID, EventType: ff.EventType,
			Error: ff.Error, At: f.now().UTC(), Event: ff.Event,
		}
		if _, _, err := r.Cluster(ff.Subject); err == nil {
			x.Cluster = ff.Subject
		}
		r.Failures = append(r.Failures, x)
		return nil
	})
	if errors.Is(err, rollout.ErrNotFound) {
		return out, nil
	}
	return out, err
}
