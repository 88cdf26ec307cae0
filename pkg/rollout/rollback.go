package rollout

import (
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// The rollback of a failed rollout: the revert order (wave by wave, newest
// first), what a revert's run and deadline mean, the end of the rollback
// and its retry.

// Reverts is what reverting a rollout's clusters needs besides the
// rollout: its application, the tag of an image the fleet ran before
// (PreviousTag) and the time.
type Reverts struct {
	App         config.Application
	PreviousTag func(image string) string
	Now         time.Time
}

// PreviousTag returns, for an image a cluster ran before, its tag when it
// is the digest the fleet last converged on (st), so a GitOps repository
// gets the version's tag back with its digest; else "". Only GitOps
// applications write tags.
func PreviousTag(app config.Application, st AppState) func(image string) string {
	if app.GitOps == nil || st.DeployedDigest == "" || st.DeployedTag == "" {
		return func(string) string { return "" }
	}
	return func(image string) string {
		if strings.HasSuffix(image, "@"+st.DeployedDigest) {
			return st.DeployedTag
		}
		return ""
	}
}

// Back tells whether a cluster is back on prev with no analysis under
// way. Flagger treats a return to the last promoted spec as a manual
// rollback and reports nothing, so a read is often the only news.
func (s CanaryStatus) Back(prev string) bool {
	return s.Settled() && s.PrimaryImage == prev && s.TargetImage == prev
}

// Rollback moves the rollback of a failed rollout on, caused by cause: it
// reverts the waves to revert now (RevertNow), or ends the rollback when
// none is left and nothing is under way: RolledBack, or RollbackFailed
// when some revert failed. The requests, and the end, are recorded with
// the rollout's change, so a crash can neither lose nor repeat a step.
func (r *Rollout) Rollback(cause cloudevents.Event, g Reverts) ([]cloudevents.Event, error) {
	if r.Phase != Failed {
		return nil, nil
	}
	if waves := r.RevertNow(); len(waves) > 0 {
		var out []cloudevents.Event
		deadline := g.Now.UTC().Add(g.App.Delivery.StepDeadline())
		ix := r.clusterIndex()
		for _, wave := range waves {
			images, tags := map[string]string{}, map[string]string{}
			for _, name := range r.ToRevert(wave) {
				c, w, err := r.clusterIn(ix, name)
				if err != nil {
					return nil, fault.Permanent(err)
				}
				// A revert's nudges (RevertMissed) count apart from
				// the apply's.
				c.Phase, c.Nudges = ClusterReverting, 0
				tag := g.PreviousTag(c.PreviousImage)
				evs, err := r.requestRun(cause, c, w, events.PurposeRevert, c.PreviousImage, tag, deadline)
				if err != nil {
					return nil, err
				}
				out = append(out, evs...)
				images[name] = c.PreviousImage
				if tag != "" {
					tags[name] = tag
				}
			}
			pr, err := r.revertPullRequest(cause, g, wave, images, tags)
			if err != nil {
				return nil, err
			}
			out = append(out, pr...)
		}
		return out, nil
	}
	for w := range r.Waves {
		if r.Reverting(w) {
			return nil, nil // wait for the wave being reverted
		}
	}
	if len(r.Running(events.PurposeApply)) > 0 {
		return nil, nil // a cluster may still take the digest: its run's end says
	}
	typ := events.TypeRolloutRolledBack
	r.Phase = RolledBack
	if failed := r.InPhase(ClusterRevertFailed); len(failed) > 0 {
		typ, r.Phase = events.TypeRolloutRollbackFailed, RollbackFailed
		var s []string
		for _, c := range failed {
			s = append(s, fmt.Sprintf("cluster %s: %s", c.Name, c.Message))
		}
		r.Reason = strings.TrimSuffix(strings.SplitN(r.Reason, "; rollback failed: ", 2)[0], "; ") + "; rollback failed: " + strings.Join(s, "; ")
	}
	done, err := events.Derive(cause, typ, r.ID, events.RolloutResult{RolloutID: r.ID, Reason: r.Reason})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{done}, nil
}

// RevertNow lists the waves whose clusters are reverted now. The rollback
// goes wave by wave, newest first, each wave once the newer ones are back:
// with no wave being reverted, the newest that took the digest. While one
// is, only clusters of that wave or a newer one that took the digest late
// (their apply ended after the rollback began): they do not wait for
// their wave's other reverts.
func (r *Rollout) RevertNow() []int {
	cur := -1
	for w := range r.Waves {
		if r.Reverting(w) {
			cur = w
		}
	}
	if cur < 0 {
		if w := r.RevertWave(len(r.Waves) - 1); w >= 0 {
			return []int{w}
		}
		return nil
	}
	var out []int
	for w := len(r.Waves) - 1; w >= cur; w-- {
		if len(r.ToRevert(w)) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// revertPullRequest asks, for a GitOps application in mode pullRequest
// whose wave's pull request was merged, for a pull request writing each
// cluster's previous image back (merged automatically where the host
// can). The live reverts do not wait for it.
func (r *Rollout) revertPullRequest(cause cloudevents.Event, g Reverts, wave int, images, tags map[string]string) ([]cloudevents.Event, error) {
	gitops := g.App.GitOps
	w := &r.Waves[wave]
	if gitops == nil || gitops.Mode != config.GitOpsModePullRequest || gitops.PullRequest == nil || gitops.PullRequest.Revert != config.GitOpsModePullRequest ||
		w.PullRequest == nil || w.PullRequest.State != PullRequestMerged || w.RevertPullRequest != nil {
		return nil, nil
	}
	now := g.Now.UTC()
	deadline := now.Add(gitops.PullRequest.MergeDeadline.Duration)
	w.RevertPullRequest = &PullRequest{State: PullRequestRequested, Deadline: deadline, Updated: now}
	req, err := events.Derive(cause, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/open", wave, events.PurposeRevert), events.PullRequestRequested{
		RolloutID: r.ID, Application: r.Application, Wave: wave, Purpose: events.PurposeRevert, Op: events.PullRequestOpen,
		Images: images, Tags: tags, Deadline: deadline,
	})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{req}, nil
}

// MarkReverted records that cluster name, being reverted, is back (msg
// says how).
func (r *Rollout) MarkReverted(name, msg string) error {
	c, _, err := r.Cluster(name)
	if err != nil {
		return fault.Permanent(err)
	}
	if c.Phase == ClusterReverting {
		c.Phase, c.Message, c.Run = ClusterReverted, msg, ""
	}
	return nil
}

// RevertRunFinished records the end of a revert run: failed, the
// cluster's revert failed; back on its previous image already (back), it
// is reverted; else a canary event or the deadline says when Flagger is
// done. An earlier step's answer changes nothing.
func (r *Rollout) RevertRunFinished(run events.PipelineRunFinished, back bool, now time.Time) error {
	c, _, err := r.Cluster(run.Cluster)
	if err != nil {
		return fault.Permanent(err)
	}
	if c.Step != run.Step || c.Run != events.PurposeRevert || c.Phase != ClusterReverting {
		return nil
	}
	c.Run = ""
	switch {
	case run.Error != "":
		c.Phase, c.Message = ClusterRevertFailed, "revert failed: "+run.Error
	case back:
		c.Phase, c.Message = ClusterReverted, "previous image restored"
	default:
		c.Applied = now.UTC()
	}
	return nil
}

// RevertWaits tells whether cluster name of r still waits for its revert's
// step.
func (r *Rollout) RevertWaits(name string, step int) bool {
	c, _, err := r.Cluster(name)
	return err == nil && c.Step == step && c.Phase == ClusterReverting
}

// RevertExpired decides a revert whose deadline d passed from the
// cluster's status (st, or the error reading it): back on its previous
// image it is reverted, else its revert failed.
func (r *Rollout) RevertExpired(d events.ClusterDeadline, st CanaryStatus, readErr error) error {
	c, _, err := r.Cluster(d.Cluster)
	if err != nil {
		return fault.Permanent(err)
	}
	if c.Step != d.Step || c.Phase != ClusterReverting {
		return nil
	}
	c.Run = ""
	switch {
	case readErr != nil:
		c.Phase, c.Message = ClusterRevertFailed, "revert not done by its deadline: the cluster cannot be read: "+readErr.Error()
	case st.Back(c.PreviousImage):
		c.Phase, c.Message = ClusterReverted, "previous image restored (read at the deadline)"
	default:
		c.Phase, c.Message = ClusterRevertFailed, fmt.Sprintf(
			"revert not done by its deadline: primary runs %s, workload %s, Flagger phase %q", st.PrimaryImage, st.TargetImage, st.Phase)
	}
	return nil
}

// RetryRollback turns a rollback that failed back into one under way, for
// the user's retry req (caused by cause): the clusters whose revert failed
// (or the one named) are reverted again, and the events functions gave up
// on are replayed under new ids.
func (r *Rollout) RetryRollback(cause cloudevents.Event, req events.RolloutRetryRequested) ([]cloudevents.Event, error) {
	r.Retries = max(r.Retries, req.Attempt)
	var out []cloudevents.Event
	for i := range r.Failures {
		x := &r.Failures[i]
		if x.Retried || (req.Cluster != "" && x.Cluster != req.Cluster) {
			continue
		}
		x.Retried = true
		ev, err := replay(cause, *x)
		if err != nil {
			return nil, err
		}
		if ev != nil {
			out = append(out, *ev)
		}
	}
	if r.Phase != RollbackFailed {
		return out, nil
	}
	for _, c := range r.InPhase(ClusterRevertFailed) {
		if req.Cluster == "" || c.Name == req.Cluster {
			c.Phase, c.Message = ClusterFailed, "revert retried"
		}
	}
	r.Phase = Failed
	return out, nil
}

// replay re-issues an event a function gave up on, from the rollout's
// copy, under a new id (the journal would drop the old one). A run request
// is not replayed: its step's time is up, and the cluster's revert is
// requested anew, with a new deadline.
func replay(cause cloudevents.Event, x Failure) (*cloudevents.Event, error) {
	if len(x.Event) == 0 || x.EventType == events.TypePipelineRunRequested {
		return nil, nil
	}
	ev, err := events.FailedEvent(events.FunctionFailed{EventID: x.EventID, Event: x.Event})
	if err != nil {
		return nil, err
	}
	ev.SetID(x.EventID + "/retry/" + cause.ID())
	return &ev, nil
}
