package events

import (
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Event types of the engine: what flotilla asks of its executors, their
// answers, the deadlines it sets itself and the controls users send.
const (
	// launch, rollback -> executors
	TypePipelineRunRequested = "dev.flotilla.pipelinerun.requested.v1"
	// pipelines/deliver: an executor took a request up (it left the queue)
	TypePipelineRunStarted = "dev.flotilla.pipelinerun.started.v1"
	// executors -> observe
	TypePipelineRunFinished = "dev.flotilla.pipelinerun.finished.v1"
	// advance -> executors: a git application's cluster succeeded, so
	// what its commit no longer renders goes (payload PruneRequested)
	TypePruneRequested = "dev.flotilla.prune.requested.v1"
	// executors: what a git application's run deleted because its commit
	// no longer renders it, in one cluster (payload ClusterPruned): after
	// the cluster's success (a prune.requested) or in a revert
	TypeClusterPruned = "dev.flotilla.cluster.pruned.v1"
	// launch, rollback -> (timer) -> observe
	TypeClusterDeadline = "dev.flotilla.cluster.deadline.v1"
	// the API -> rollback, launch
	TypeRolloutRetryRequested = "dev.flotilla.rollout.retry.requested.v1"
	// rollback: a revert failed for good
	TypeRolloutRollbackFailed = "dev.flotilla.rollout.rollbackfailed.v1"

	// Controls users send through the API (payload Control): a rollout's
	// pause, resume and abort, and stopping and starting the whole fleet.
	TypeRolloutPauseRequested  = "dev.flotilla.rollout.pause.requested.v1"
	TypeRolloutResumeRequested = "dev.flotilla.rollout.resume.requested.v1"
	TypeRolloutAbortRequested  = "dev.flotilla.rollout.abort.requested.v1"
	// TypeRolloutOverrideRequested lets the current wave start inside a
	// freeze window (a reason is required).
	TypeRolloutOverrideRequested = "dev.flotilla.rollout.override.requested.v1"
	// TypeRolloutRollbackRequested rolls the whole fleet back from a
	// succeeded rollout to the version before it.
	TypeRolloutRollbackRequested = "dev.flotilla.rollout.rollback.requested.v1"
	TypeFleetStopRequested       = "dev.flotilla.fleet.stop.requested.v1"
	TypeFleetStartRequested      = "dev.flotilla.fleet.start.requested.v1"
	// TypeClustersRemoved: clusters left the fleet's configuration (a
	// reload, a discovery source; payload ClustersRemoved): the rollouts
	// in flight go on without them.
	TypeClustersRemoved = "dev.flotilla.fleet.clusters.removed.v1"
	// TypeVersionQuarantineRequested: a user marks a version bad (payload
	// QuarantineRequested).
	TypeVersionQuarantineRequested = "dev.flotilla.version.quarantine.requested.v1"
	// TypeWaveApprovalRequested: a user approves a wave (payload
	// WaveApproval).
	TypeWaveApprovalRequested = "dev.flotilla.wave.approval.requested.v1"

	// Pull requests of GitOps applications in mode pullRequest: launch,
	// rollback, plan and advance ask the proposer (payload
	// PullRequestRequested; op read is also the poll timer); the proposer
	// tells launch what it found (PullRequestStatus).
	TypePullRequestRequested = "dev.flotilla.pullrequest.requested.v1"
	TypePullRequestStatus    = "dev.flotilla.pullrequest.status.v1"
)

// Operations of a PullRequestRequested.
const (
	PullRequestOpen  = "open"  // push the wave's branch, open (or find) its pull request
	PullRequestRead  = "read"  // read its state (a host's webhook, or the poll)
	PullRequestClose = "close" // close it unmerged: its wave no longer waits for it
	// PullRequestMerge asks the host to merge it, now or once its required
	// checks pass (autoMerge, and every revert); a failed attempt is asked
	// again later (Attempt), up to a budget, then waits for a user's retry.
	PullRequestMerge = "merge"
)

// What asking the host to merge a pull request did (PullRequestStatus.
// AutoMerge; "unsupported" is followed by ": " and the host's reason).
const (
	MergeAsked       = "asked"       // asked, no answer yet
	MergeMerged      = "merged"      // merged at once
	MergeScheduled   = "scheduled"   // the host merges it once its required checks pass
	MergeUnsupported = "unsupported" // the host or the repository refuses: a human merges
	MergeFailing     = "failing"     // the host answered an error; asked again at NextMerge
	MergeFailed      = "failed"      // the host kept failing, or refused for good: a user's retry asks again
)

// States a PullRequestStatus reports.
const (
	PullRequestOpened    = "open"
	PullRequestMerged    = "merged"
	PullRequestClosed    = "closed"    // closed without merging
	PullRequestUnchanged = "unchanged" // the base held every change already: nothing to merge
	PullRequestFailed    = "failed"    // Error says why; given up at the deadline
)

// PullRequestRequested asks the proposer to open, read or close the pull
// request of one wave of a rollout.
type PullRequestRequested struct {
	RolloutID   string `json:"rolloutId"`
	Application string `json:"application"`
	Wave        int    `json:"wave"`
	// Purpose is apply (the rollout's version) or revert (each cluster's
	// previous version, in a rollback).
	Purpose string `json:"purpose"`
	Op      string `json:"op"`
	// Number is the pull request's, once opened (read and close).
	Number int64 `json:"number,omitempty"`
	// Images are, for a revert, the image each cluster of the wave goes
	// back to; Tags its tag, where known.
	Images map[string]string `json:"images,omitempty"`
	Tags   map[string]string `json:"tags,omitempty"`
	// Deadline is when the wave stops waiting for the merge.
	Deadline time.Time `json:"deadline"`
	// Seq tells polls apart.
	Seq int `json:"seq,omitempty"`
	// Reason is why a close is asked (the rollout's end), for its comment.
	Reason string `json:"reason,omitempty"`
	// Head is the commit a merge must merge (the pull request's head when
	// it opened): a branch pushed anew since is not merged unseen.
	Head string `json:"head,omitempty"`
	// Attempt counts a merge's attempts (from 1), Since is when its first
	// was asked (the budget of retries runs from it), and Retry is the
	// user's retry that asked again (0: none), so each has its own ids.
	Attempt int       `json:"attempt,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	Retry   int       `json:"retry,omitempty"`
}

// PullRequestStatus is what the proposer found of a wave's pull request.
type PullRequestStatus struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
	Purpose   string `json:"purpose"`
	Number    int64  `json:"number,omitempty"`
	URL       string `json:"url,omitempty"`
	Branch    string `json:"branch,omitempty"`
	// Head is its head commit, when opened.
	Head string `json:"head,omitempty"`
	// State is one of the PullRequest* states.
	State       string `json:"state"`
	MergeCommit string `json:"mergeCommit,omitempty"`
	// Verified: the base holds every change after the merge (not edited
	// away in review).
	Verified bool `json:"verified,omitempty"`
	// AutoMerge is what asking for a merge did: one of the Merge* states
	// (unsupported with the host's reason).
	AutoMerge string `json:"autoMerge,omitempty"`
	// MergeError is the host's last answer to a failed merge; NextMerge
	// is when flotilla asks again (zero: not before a user's retry).
	MergeError string    `json:"mergeError,omitempty"`
	NextMerge  time.Time `json:"nextMerge,omitzero"`
	// Actor closed or merged it, when the host said.
	Actor string `json:"actor,omitempty"`
	Error string `json:"error,omitempty"`
}

// QuarantineRequested marks a version of an application bad: a tag (every
// digest of it) or one digest.
type QuarantineRequested struct {
	Application string `json:"application"`
	Tag         string `json:"tag,omitempty"`
	Digest      string `json:"digest,omitempty"`
	User        string `json:"user"`
	Reason      string `json:"reason"`
}

// WaveApproval is a user's approval of a wave of a rollout: Approver is the
// API token's name (what makes approvers distinct), User how the control
// is recorded.
type WaveApproval struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"` // index, from 0
	Approver  string `json:"approver"`
	User      string `json:"user"`
	Reason    string `json:"reason,omitempty"`
}

// Control is a user's control: who sent it (the API token's name), why,
// and the rollout it is about ("" for the fleet's).
type Control struct {
	RolloutID string `json:"rolloutId,omitempty"`
	User      string `json:"user"`
	Reason    string `json:"reason,omitempty"`
}

// ClustersRemoved names the clusters a new configuration no longer has,
// and what removed them.
type ClustersRemoved struct {
	Clusters []string `json:"clusters"`
	// Source is what swapped the configuration in (the file's change,
	// SIGHUP, a discovery source).
	Source string `json:"source,omitempty"`
}

// Purposes of a pipeline run.
const (
	PurposeApply  = "apply"  // the rollout's digest, with analysis
	PurposeRevert = "revert" // the cluster's previous image, without analysis
)

// PipelineRunRequested asks an executor to run the rollout pipeline for one
// cluster: apply the rollout's image (Purpose apply), or give the cluster its
// previous image back (Purpose revert). Step numbers the cluster's steps in
// the rollout, so a late answer to an earlier step is told apart.
type PipelineRunRequested struct {
	RolloutID   string `json:"rolloutId"`
	Application string `json:"application"`
	Wave        int    `json:"wave"`
	Cluster     string `json:"cluster"`
	Purpose     string `json:"purpose"`
	Step        int    `json:"step"`
	// Image is the pinned reference to run; Tag its tag when a GitOps
	// repository should get it back too ("" when unknown).
	Image string `json:"image"`
	Tag   string `json:"tag,omitempty"`
	// Deadline is when the step's time is up: the executor stops retrying
	// then and reports the run failed.
	Deadline time.Time `json:"deadline"`
	// Restart, when set, is put on the workload's pod template: a user's
	// retry of a cluster whose analysis failed makes Flagger analyse the
	// same image again.
	Restart string `json:"restart,omitempty"`
	// Members, for a release set of image members, is the set's version
	// to run: one image per member, in the set's order (the rollout's
	// versions for an apply, its previous versions for a revert); Image
	// is then the set's version's manifest digest. A member without an
	// entry is left as the cluster runs it.
	Members []MemberImage `json:"members,omitempty"`
}

// MemberImage is one image member's version in a release set's run.
type MemberImage struct {
	Application string `json:"application"`
	Image       string `json:"image"` // registry/repository
	Tag         string `json:"tag"`
	Digest      string `json:"digest"`
}

// Ref is the image the member runs: pinned by its digest
// (repository@digest), else by its tag (a cluster's previous version read
// from a workload that ran a tag).
func (m MemberImage) Ref() string {
	switch {
	case m.Digest != "":
		return m.Image + "@" + m.Digest
	case m.Tag != "":
		return m.Image + ":" + m.Tag
	}
	return m.Image
}

// PruneRequested asks the executors to delete from Cluster what
// Application's commit Revision (repository@commit) no longer renders and
// an earlier commit applied there (the objects its inventory holds
// pending): advance asks when it records the cluster's success. Nothing
// answers it; a cluster whose inventory is no longer Revision's (a newer
// apply or a revert took it over) has nothing to prune. Deadline ends the
// executor's retries.
type PruneRequested struct {
	RolloutID   string    `json:"rolloutId"`
	Application string    `json:"application"`
	Wave        int       `json:"wave"`
	Cluster     string    `json:"cluster"`
	Revision    string    `json:"revision"`
	Deadline    time.Time `json:"deadline"`
}

// ClusterPruned tells what a run deleted from Cluster because Revision
// (repository@commit) no longer renders it and an earlier commit applied
// it there: Purpose "prune" after the cluster's success, "revert" when a
// rollback went back to a commit without it. Objects are
// "Kind/namespace/name", at most about 2 KiB of them; Count is how many in
// all. It is told, not acted on.
type ClusterPruned struct {
	RolloutID   string   `json:"rolloutId"`
	Application string   `json:"application"`
	Wave        int      `json:"wave"`
	Cluster     string   `json:"cluster"`
	Revision    string   `json:"revision"`
	Purpose     string   `json:"purpose"`
	Objects     []string `json:"objects"`
	Count       int      `json:"count"`
}

// PurposePrune is ClusterPruned's Purpose after a cluster's success.
const PurposePrune = "prune"

// PipelineRunStart: an executor took a requested run up, once per
// request (a retried attempt does not start it again). Between the request
// and this, the run waited for a free runner; it is told, not acted on.
type PipelineRunStart struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
	Cluster   string `json:"cluster"`
	Purpose   string `json:"purpose"`
	Step      int    `json:"step"`
	Image     string `json:"image"`
}

// PipelineRunFinished: an executor ended a requested run. Error is empty
// when the run succeeded.
type PipelineRunFinished struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
	Cluster   string `json:"cluster"`
	Purpose   string `json:"purpose"`
	Step      int    `json:"step"`
	Image     string `json:"image"`
	// PreviousImage is what the workload ran before the rollout; Changed
	// tells whether the run changed the workload.
	PreviousImage string `json:"previousImage,omitempty"`
	Changed       bool   `json:"changed"`
	Error         string `json:"error,omitempty"`
	// PreviousMembers, of a release set of image members' apply, is what
	// each member the run set ran before (its primary's image), by
	// member: the cluster's previous version, what its revert restores.
	PreviousMembers map[string]string `json:"previousMembers,omitempty"`
}

// ClusterDeadline: the time of a cluster's step is up. Observe reads the
// cluster and decides.
type ClusterDeadline struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
	Cluster   string `json:"cluster"`
	Purpose   string `json:"purpose"`
	Step      int    `json:"step"`
	// Extension counts the deadlines this step had before: a canary still
	// making progress gets a few more.
	Extension int `json:"extension,omitempty"`
}

// RolloutRetryRequested: a user asks flotilla to try again what failed in a
// rollout: the reverts of a rollback that failed, and the events functions
// gave up on. Cluster, when set, limits the retry to one cluster.
type RolloutRetryRequested struct {
	RolloutID string `json:"rolloutId"`
	Cluster   string `json:"cluster,omitempty"`
	// Attempt numbers the user's retries of the rollout, so each has its
	// own event ids.
	Attempt int    `json:"attempt"`
	User    string `json:"user,omitempty"`
}

// ExtDue is the CloudEvents extension of an event due later (RFC 3339): the
// bus keeps it as a timer and journals it when it is due.
const ExtDue = "flotilladue"

// At marks e due at t.
func At(e cloudevents.Event, t time.Time) cloudevents.Event {
	e.SetExtension(ExtDue, types.Timestamp{Time: t.UTC()})
	return e
}

// Due returns when e is due, if it carries ExtDue.
func Due(e cloudevents.Event) (time.Time, bool) {
	v, ok := e.Extensions()[ExtDue]
	if !ok {
		return time.Time{}, false
	}
	t, err := types.ToTime(v)
	if err != nil {
		return time.Time{}, false
	}
	return t, true
}

// FailedEvent returns the event a function gave up on, from its
// function.failed record.
func FailedEvent(f FunctionFailed) (cloudevents.Event, error) {
	var e cloudevents.Event
	if len(f.Event) == 0 {
		return e, fault.Permanent(fmt.Errorf("function.failed of %s carries no event", f.EventID))
	}
	if err := json.Unmarshal(f.Event, &e); err != nil {
		return e, fault.Permanent(fmt.Errorf("decoding the event %s a function gave up on: %w", f.EventID, err))
	}
	return e, nil
}
