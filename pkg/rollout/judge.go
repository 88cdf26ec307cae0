package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Judging what a cluster reports: a canary event of Flagger, the end of a
// pipeline run, a step's deadline. Each rule reads the cluster's canary as
// its caller read it (CanaryStatus) and turns what it shows into the
// cluster's result (cluster.succeeded, .failed, .applied, .reverted).

// MaxExtensions bounds the deadlines a cluster's step gets beyond its
// first while Flagger's analysis is under way.
const MaxExtensions = 3

// result derives a result of cluster name of r from cause.
func (r *Rollout) result(cause cloudevents.Event, typ, name, reason string) ([]cloudevents.Event, error) {
	_, wave, _ := r.Cluster(name)
	out, err := events.Derive(cause, typ, name, events.ClusterResult{RolloutID: r.ID, Wave: wave, Cluster: name, Reason: reason})
	if err != nil {
		return nil, err
	}
	out.SetSubject(name)
	return []cloudevents.Event{out}, nil
}

// MaxNudges bounds the applies of the same image again for a revision
// Flagger missed (Missed, RevertMissed), per cluster and retry, and per
// cluster and revert.
const MaxNudges = 2

// Canary records what Flagger's event c and the canary's status st say of
// its cluster, and returns the cluster's result it decides (Classify),
// caused by cause; none while the cluster's outcome is open. A revision
// Flagger missed (Missed) is applied again, with a restart so Flagger sees
// a new one, due by deadline (up to MaxNudges times); so is a revert
// Flagger missed (RevertMissed).
func (r *Rollout) Canary(cause cloudevents.Event, c events.Canary, st CanaryStatus, deadline time.Time) ([]cloudevents.Event, error) {
	cl, _, err := r.Cluster(c.Cluster)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	cl.CanaryPhase, cl.CanaryWeight, cl.Message = st.Phase, st.Weight, c.Message
	if ws := st.WorkloadPhases(); ws != nil {
		// One of several canaries spoke: say which.
		cl.Workloads = ws
		if c.Name != "" && c.Message != "" {
			cl.Message = c.Name + ": " + c.Message
		}
	}
	typ, reason := r.Classify(cl, c, st)
	if typ == "" && r.Phase == Progressing && r.Missed(cl, st) && cl.Nudges < MaxNudges {
		cl.Nudges++
		cl.Phase = ClusterApplying
		cl.Message = fmt.Sprintf("Flagger initialized the canary at %s on an older primary, missing %s applied meanwhile: applying it again with a restart so Flagger analyses it (%d of %d)",
			st.Transition.UTC().Format(time.RFC3339), r.Ref(), cl.Nudges, MaxNudges)
		return r.RequestRun(cause, cl, events.PurposeApply, r.Ref(), r.Tag, deadline)
	}
	if typ == "" && r.Phase == Failed && r.RevertMissed(cl, st) && cl.Nudges < MaxNudges {
		cl.Nudges++
		cl.Message = fmt.Sprintf("Flagger settled the canary %s at %s with the revert to %s applied and its primary on %s, so it will not take the revert up: applying it again with a restart (%d of %d)",
			st.Phase, st.Transition.UTC().Format(time.RFC3339), cl.PreviousImage, st.PrimaryImage, cl.Nudges, MaxNudges)
		return r.RequestRun(cause, cl, events.PurposeRevert, cl.PreviousImage, r.revertTag(cl), deadline)
	}
	if typ == "" {
		return nil, nil
	}
	if reason != "" && c.Name != "" && len(st.Workloads) > 1 {
		reason = c.Name + ": " + reason
	}
	out, err := events.Derive(cause, typ, c.Cluster, events.ClusterResult{RolloutID: r.ID, Wave: r.waveOf(cl), Cluster: cl.Name, Reason: reason})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{out}, nil
}

// waveOf is the index of cl's wave.
func (r *Rollout) waveOf(cl *Cluster) int {
	_, w, _ := r.Cluster(cl.Name)
	return w
}

// Classify decides what a canary event means for cluster cl of r, given
// the images its primary and canary workloads run now: "" while the
// outcome is open. A canary's success counts once the primary runs r's
// digest, its failure once the canary runs it and the primary does not; a
// wave must stay healthy through its bake; a revert is done when both
// workloads run the previous image and no analysis is under way, whatever
// Flagger says.
func (r *Rollout) Classify(cl *Cluster, c events.Canary, st CanaryStatus) (typ, reason string) {
	primary, target := st.PrimaryImage, st.TargetImage
	switch cl.Phase {
	case ClusterApplying, ClusterProgressing:
		switch c.Outcome {
		case events.CanarySucceeded, events.CanaryInitialized:
			if primary == r.Ref() {
				return events.TypeClusterSucceeded, c.Message
			}
		case events.CanaryFailed:
			if target == r.Ref() && primary != r.Ref() {
				return events.TypeClusterFailed, c.Message
			}
		}
	case ClusterSucceeded:
		if r.Baking(r.waveOf(cl)) && c.Outcome == events.CanaryFailed {
			return events.TypeClusterFailed, "failed during the wave's bake: " + c.Message
		}
	case ClusterReverting:
		// A release set's revert run goes on after its canaries are back
		// (its Jobs run last): its end says when the cluster is.
		if st.Settled() && primary == cl.PreviousImage && target == cl.PreviousImage && (len(r.Members) == 0 || cl.Run == "") {
			return events.TypeClusterReverted, c.Message
		}
	}
	return "", ""
}

// Missed tells whether Flagger missed the revision r applied to cluster
// cl: its canary runs r's digest and its primary does not, yet Flagger
// finished initializing the canary after the apply. Flagger copies the
// workload into the primary first and records the spec it sees last; a
// revision applied in between is that spec, so Flagger never sees it as
// new and the canary rests Initialized on the older primary. Flagger's
// transition time has whole seconds: one in the second of the apply
// counts (at worst, one more analysis of the same image).
func (r *Rollout) Missed(cl *Cluster, st CanaryStatus) bool {
	return cl.Phase == ClusterProgressing && cl.Run == "" && !cl.Applied.IsZero() &&
		st.Phase == "Initialized" && !st.Transition.Before(cl.Applied.Truncate(time.Second)) &&
		st.TargetImage == r.Ref() && st.PrimaryImage != r.Ref()
}

// RevertMissed tells whether Flagger missed the revert applied to cluster
// cl: its canary runs the previous image and its primary does not, yet
// Flagger settled after the revert's run ended. Flagger records the spec
// it sees when it settles (a failed analysis ends by recording the
// workload's spec as applied): a revert applied while it failed the
// canary is that spec, so Flagger never sees it as new and the primary
// stays on the rollout's image. Whole seconds, as Missed.
func (r *Rollout) RevertMissed(cl *Cluster, st CanaryStatus) bool {
	return cl.Phase == ClusterReverting && cl.Run == "" && !cl.Applied.IsZero() && cl.PreviousImage != "" &&
		st.Settled() && !st.Transition.Before(cl.Applied.Truncate(time.Second)) &&
		st.TargetImage == cl.PreviousImage && st.PrimaryImage != cl.PreviousImage
}

// revertTag is the tag of cl's previous image, when it is the version the
// fleet ran before r (a GitOps application writes it back with the
// digest), else "".
func (r *Rollout) revertTag(cl *Cluster) string {
	if r.PreviousDigest != "" && strings.HasSuffix(cl.PreviousImage, "@"+r.PreviousDigest) {
		return r.PreviousTag
	}
	return ""
}

// Decisive tells whether status st (from a cache) is enough to judge
// canary event c: it shows the outcome the event reports, or the event
// reports no outcome (Flagger's progress, recorded as it is). Never for a
// cluster being reverted: the state a revert waits for is the one the
// cluster had before the rollout, so a cache left behind (its watch cut
// while the API server was away, say) shows it although Flagger has since
// promoted the new image; only a live read says the revert is done.
func (r *Rollout) Decisive(c events.Canary, st CanaryStatus) bool {
	cl, _, err := r.Cluster(c.Cluster)
	if err != nil {
		return true // Canary reports it
	}
	if cl.Phase == ClusterReverting {
		return false
	}
	switch c.Outcome {
	case events.CanarySucceeded, events.CanaryInitialized, events.CanaryFailed:
	default:
		return true
	}
	scratch := *cl
	typ, _ := r.Classify(&scratch, c, st)
	return typ != ""
}

// Applied records the end of an apply run of a cluster (caused by cause,
// at now) and returns its result. The run failed: so did the cluster. The
// cluster took the digest: it waits for Flagger (cluster.applied), or,
// when already (the run changed nothing and the primary runs the digest),
// it is done. A rollout that failed meanwhile hears of the cluster by
// cluster.applied, to revert it. An earlier step's answer, or one handled
// already, changes nothing.
func (r *Rollout) Applied(cause cloudevents.Event, run events.PipelineRunFinished, already bool, now time.Time) ([]cloudevents.Event, error) {
	cl, _, err := r.Cluster(run.Cluster)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	if cl.Step != run.Step || cl.Run != events.PurposeApply {
		return nil, nil
	}
	cl.Run = ""
	if run.Error != "" {
		cl.Message = run.Error
		if len(r.Members) > 0 && cl.PreviousImage == "" && r.PreviousDigest != "" {
			// A release set's run stops at the first member that fails,
			// those before it applied (and promoted): the cluster goes
			// back to the version the fleet ran before, as every other.
			cl.PreviousImage = r.Image + "@" + r.PreviousDigest
			cl.PreviousVersions = slices.Clone(r.PreviousVersions)
		}
		if r.Phase != Progressing {
			cl.Phase = ClusterFailed
			return r.result(cause, events.TypeClusterApplied, cl.Name, run.Error)
		}
		return r.result(cause, events.TypeClusterFailed, cl.Name, run.Error)
	}
	if cl.PreviousImage == "" {
		cl.PreviousImage = run.PreviousImage
		if len(r.Versions) > 0 {
			// A release set of image members: what the cluster's
			// members ran before is the cluster's previous version.
			if cl.PreviousVersions = r.clusterPrevious(run.PreviousMembers); len(cl.PreviousVersions) > 0 {
				cl.PreviousImage = r.Image + "@" + cl.PreviousVersions.Digest()
			}
		}
	}
	cl.Applied = now.UTC()
	if cl.Phase == ClusterApplying {
		cl.Phase = ClusterProgressing
	}
	if already && r.Phase == Progressing {
		return r.result(cause, events.TypeClusterSucceeded, cl.Name, "already running "+r.Ref())
	}
	return r.result(cause, events.TypeClusterApplied, cl.Name, "")
}

// Waits tells whether cluster cl of r still waits for step's outcome.
func (r *Rollout) Waits(cl *Cluster, step int) bool {
	return r.Phase == Progressing && cl.Step == step &&
		(cl.Phase == ClusterApplying || cl.Phase == ClusterProgressing)
}

// Expire decides a cluster whose step's time is up (deadline d, caused by
// cause), from what the cluster runs (st, or the error reading it): the
// primary runs the digest (succeeded), Flagger failed it, the run or
// Flagger never started (failed), or Flagger's analysis is still under way
// (another deadline at next, up to MaxExtensions).
func (r *Rollout) Expire(cause cloudevents.Event, d events.ClusterDeadline, st CanaryStatus, readErr error, next time.Time) ([]cloudevents.Event, error) {
	cl, _, err := r.Cluster(d.Cluster)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	if !r.Waits(cl, d.Step) {
		return nil, nil
	}
	typ, reason := r.Judge(cl, st, readErr)
	if ws := st.WorkloadPhases(); ws != nil && readErr == nil {
		cl.Workloads = ws
	}
	if typ == "" && d.Extension < MaxExtensions {
		// Still progressing: record where it is, and look again.
		cl.CanaryPhase, cl.CanaryWeight = st.Phase, st.Weight
		cl.Deadline = next.UTC()
		again := d
		again.Extension++
		ev, err := events.Derive(cause, events.TypeClusterDeadline, fmt.Sprintf("extension/%d", again.Extension), again)
		if err != nil {
			return nil, err
		}
		ev.SetSubject(d.Cluster)
		return []cloudevents.Event{events.At(ev, cl.Deadline)}, nil
	}
	if typ == "" {
		typ, reason = events.TypeClusterFailed, fmt.Sprintf("still %s at weight %d after %d more deadlines", st.Phase, st.Weight, MaxExtensions)
	}
	if typ == events.TypeClusterFailed {
		reason = fmt.Sprintf("no result by its deadline (%s): %s", cl.Deadline.Format(time.RFC3339), reason)
	}
	cl.Message = reason
	return r.result(cause, typ, cl.Name, reason)
}

// Judge decides cluster cl of r at its deadline from its status: a result
// type and its reason, or "" while Flagger's analysis is under way (its
// own progress deadline fails a canary that is stuck).
func (r *Rollout) Judge(cl *Cluster, st CanaryStatus, readErr error) (typ, reason string) {
	switch {
	case readErr != nil:
		return events.TypeClusterFailed, "the cluster cannot be read: " + readErr.Error()
	case st.PrimaryImage == r.Ref() && st.Settled():
		return events.TypeClusterSucceeded, "the primary runs " + r.Ref() + " (read at the deadline)"
	case st.Phase == "Failed":
		return events.TypeClusterFailed, "Flagger's analysis failed" + failedWorkloads(st)
	case cl.Run != "":
		return events.TypeClusterFailed, "its pipeline run is still not done"
	case st.TargetImage != r.Ref():
		return events.TypeClusterFailed, fmt.Sprintf("the workload runs %s, not %s", st.TargetImage, r.Ref())
	case !st.Settled():
		return "", ""
	}
	return events.TypeClusterFailed, fmt.Sprintf("Flagger has not taken up the new revision (phase %q)", st.Phase)
}

// RecordFailure records on r an event a function gave up on, once while
// it is not retried; the cluster it was about is named when r has it.
func (r *Rollout) RecordFailure(x Failure, subject string) {
	for _, y := range r.Failures {
		if y.EventID == x.EventID && y.Function == x.Function && !y.Retried {
			return
		}
	}
	if _, _, err := r.Cluster(subject); err == nil {
		x.Cluster = subject
	}
	r.Failures = append(r.Failures, x)
}

// failedWorkloads names the canaries of a release of several workloads
// whose analysis failed (" of <name>, ..."), "" for a release of one.
func failedWorkloads(st CanaryStatus) string {
	var names []string
	for _, w := range st.Workloads {
		if w.Phase == "Failed" {
			names = append(names, w.Name)
		}
	}
	if len(names) == 0 || len(st.Workloads) < 2 {
		return ""
	}
	return " of " + strings.Join(names, ", ")
}
