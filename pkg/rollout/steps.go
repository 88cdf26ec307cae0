package rollout

import (
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// RequestRun starts a new step of cluster c (the caller sets its phase): a
// pipeline run request for purpose and the step's deadline timer, both
// derived from cause. The cluster records the step, its run and deadline.
func (r *Rollout) RequestRun(cause cloudevents.Event, c *Cluster, purpose, image, tag string, deadline time.Time) ([]cloudevents.Event, error) {
	_, wave, err := r.Cluster(c.Name)
	if err != nil {
		return nil, err
	}
	return r.requestRun(cause, c, wave, purpose, image, tag, deadline)
}

// requestRun is RequestRun of c in wave, for the callers that found c
// through an index (clusterIndex) rather than Cluster's search.
func (r *Rollout) requestRun(cause cloudevents.Event, c *Cluster, wave int, purpose, image, tag string, deadline time.Time) ([]cloudevents.Event, error) {
	c.Step++
	c.Run, c.Deadline = purpose, deadline
	step := fmt.Sprintf("%s/%s/%d", c.Name, purpose, c.Step)
	req, err := events.Derive(cause, events.TypePipelineRunRequested, step, events.PipelineRunRequested{
		RolloutID: r.ID, Application: r.Application, Wave: wave, Cluster: c.Name,
		Purpose: purpose, Step: c.Step, Image: image, Tag: tag, Deadline: deadline,
		Restart: restart(r, c, purpose), Members: runMembers(r, c, purpose),
	})
	if err != nil {
		return nil, err
	}
	req.SetSubject(c.Name)
	due, err := events.Derive(cause, events.TypeClusterDeadline, step, events.ClusterDeadline{
		RolloutID: r.ID, Wave: wave, Cluster: c.Name, Purpose: purpose, Step: c.Step,
	})
	if err != nil {
		return nil, err
	}
	due.SetSubject(c.Name)
	return []cloudevents.Event{req, events.At(due, deadline)}, nil
}

// runMembers is what a run of purpose in cluster c gives each image
// member of r's release set: the rollout's versions, or for a revert what
// the cluster ran before (the fleet's previous version when the cluster
// recorded none); none for an application or a set of git members.
func runMembers(r *Rollout, c *Cluster, purpose string) []events.MemberImage {
	vs := r.Versions
	if purpose == events.PurposeRevert {
		vs = c.PreviousVersions
		if len(vs) == 0 {
			vs = r.PreviousVersions
		}
	}
	var out []events.MemberImage
	for _, m := range vs {
		out = append(out, events.MemberImage{Application: m.Application, Image: m.Image, Tag: m.Tag, Digest: m.Digest})
	}
	return out
}

// restart is the token an apply of a retried or nudged cluster, or a
// nudged revert, puts on the workload's pod template, so Flagger sees a
// new revision of the same image.
func restart(r *Rollout, c *Cluster, purpose string) string {
	switch {
	case purpose == events.PurposeRevert && c.Nudges > 0:
		// Step is new with each request: a retried rollback's nudge
		// differs from the one the workload may carry already.
		return fmt.Sprintf("%s/%d/revert/%d", r.ID, c.Retry, c.Step)
	case purpose != events.PurposeApply:
		return ""
	case c.Retry == 0 && c.Nudges == 0 && r.Kind != "":
		// A catch-up or a drift's revert applies the validated digest
		// the workload may run already: a new revision all the same, so
		// Flagger analyses it and promotes it over the primary.
		return r.ID
	case c.Retry == 0 && c.Nudges == 0:
		return ""
	case c.Nudges == 0:
		return fmt.Sprintf("%s/%d", r.ID, c.Retry)
	}
	return fmt.Sprintf("%s/%d/nudge/%d", r.ID, c.Retry, c.Nudges)
}

// ClosePullRequests marks closed the open pull request of every wave that
// no longer waits for it (the rollout ended, or moved past it) and returns
// the requests, caused by cause, that the proposer close them with a
// comment giving reason. Recorded with the rollout's change, they are
// asked once, even of a rollout archived by that change.
func (r *Rollout) ClosePullRequests(cause cloudevents.Event, reason string, now time.Time) ([]cloudevents.Event, error) {
	var out []cloudevents.Event
	for w := range r.Waves {
		pr := r.Waves[w].PullRequest
		if pr == nil || pr.State != PullRequestOpen || pr.Number == 0 || (r.Phase == Progressing && r.Wave == w) {
			continue
		}
		pr.State, pr.Message, pr.Updated = PullRequestClosed, "closed by flotilla: "+reason, now
		ev, err := events.Derive(cause, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/close", w, events.PurposeApply), events.PullRequestRequested{
			RolloutID: r.ID, Application: r.Application, Wave: w, Purpose: events.PurposeApply, Op: events.PullRequestClose,
			Number: pr.Number, Deadline: pr.Deadline, Reason: reason,
		})
		if err != nil {
			return nil, err
		}
		ev.SetExtension(events.ExtRolloutID, r.ID)
		out = append(out, ev)
	}
	return out, nil
}

// MergeFailed reports whether the host failed to merge it and flotilla
// stopped asking: a user's retry asks again.
func (p *PullRequest) MergeFailed() bool {
	return p != nil && p.State == PullRequestOpen && p.AutoMerge == events.MergeFailed
}

// RetryMerge asks the host again to merge the pull request of the current
// wave, when flotilla stopped asking after the host failed (MergeFailed):
// a user's retry (attempt, caused by cause). It returns the request, none
// when there is nothing to ask again.
func (r *Rollout) RetryMerge(cause cloudevents.Event, attempt int, now time.Time) ([]cloudevents.Event, error) {
	if r.Phase != Progressing || r.Wave >= len(r.Waves) {
		return nil, nil
	}
	pr := r.Waves[r.Wave].PullRequest
	if !pr.MergeFailed() {
		return nil, nil
	}
	pr.AutoMerge, pr.MergeError, pr.NextMerge, pr.Updated = events.MergeAsked, "", time.Time{}, now
	ev, err := events.Derive(cause, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/merge", r.Wave, events.PurposeApply), events.PullRequestRequested{
		RolloutID: r.ID, Application: r.Application, Wave: r.Wave, Purpose: events.PurposeApply, Op: events.PullRequestMerge,
		Number: pr.Number, Head: pr.Head, Deadline: pr.Deadline, Attempt: 1, Since: now, Retry: attempt,
	})
	if err != nil {
		return nil, err
	}
	ev.SetExtension(events.ExtRolloutID, r.ID)
	return []cloudevents.Event{ev}, nil
}

// PullRequestFound records what the proposer found of a wave's pull
// request (st), caused by cause: merged (and verified) or unchanged
// starts the wave as far as g lets it (Start); closed unmerged, a merge
// the base does not hold, or a failure aborts the rollout. A revert's pull
// request is only recorded; a decided one is not changed again (a
// redelivery, or a late read).
func (r *Rollout) PullRequestFound(cause cloudevents.Event, st events.PullRequestStatus, g Gates) ([]cloudevents.Event, error) {
	if st.Wave < 0 || st.Wave >= len(r.Waves) {
		return nil, nil
	}
	wave := &r.Waves[st.Wave]
	slot := &wave.PullRequest
	if st.Purpose == events.PurposeRevert {
		slot = &wave.RevertPullRequest
	}
	if *slot == nil {
		*slot = &PullRequest{}
	}
	pr := *slot
	switch pr.State {
	case PullRequestMerged, PullRequestClosed, PullRequestUnchanged, PullRequestFailed:
		return nil, nil
	}
	pr.record(st, g.Now.UTC())
	if st.Purpose == events.PurposeRevert || r.Phase != Progressing {
		return nil, nil
	}
	switch pr.State {
	case PullRequestOpen:
		if r.Wave == st.Wave {
			r.Waiting = r.PullRequestWaiting(st.Wave)
		}
		return nil, nil
	case PullRequestMerged, PullRequestUnchanged:
		if g.App.Name == "" {
			return nil, fault.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", r.ID, r.Application))
		}
		return r.Start(cause, g)
	}
	return r.AbortForPullRequest(cause, st.Wave, pr.Message)
}

// record copies a status into the pull request.
func (pr *PullRequest) record(st events.PullRequestStatus, now time.Time) {
	if st.Number != 0 {
		pr.Number, pr.URL = st.Number, st.URL
	}
	if st.Branch != "" {
		pr.Branch = st.Branch
	}
	if st.AutoMerge != "" {
		pr.AutoMerge, pr.MergeError, pr.NextMerge = st.AutoMerge, st.MergeError, st.NextMerge
	}
	if st.Head != "" {
		pr.Head = st.Head
	}
	pr.MergeCommit, pr.Updated = st.MergeCommit, now
	switch st.State {
	case events.PullRequestOpened:
		pr.State = PullRequestOpen
	case events.PullRequestMerged:
		pr.State = PullRequestMerged
		if !st.Verified {
			pr.State, pr.Message = PullRequestFailed, st.Error
		}
	case events.PullRequestUnchanged:
		pr.State, pr.Message = PullRequestUnchanged, "the base held every image already"
	case events.PullRequestClosed:
		pr.State, pr.Message = PullRequestClosed, "closed without merging"
		if st.Actor != "" {
			pr.Message += " by " + st.Actor
		}
	default:
		pr.State, pr.Message = PullRequestFailed, st.Error
	}
}
