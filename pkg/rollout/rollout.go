package rollout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Phase of a rollout.
type Phase string

const (
	Progressing Phase = "Progressing"
	Succeeded   Phase = "Succeeded"
	Failed      Phase = "Failed" // failed, rollback under way
	RolledBack  Phase = "RolledBack"
	// RollbackFailed: the rollback ended with clusters whose revert failed
	// (named in Reason); `flotilla retry` reverts them again.
	RollbackFailed Phase = "RollbackFailed"
	// Queued: a newer version waiting for the application's rollout in
	// flight to end (onNewVersion: queue, or behind a rollback).
	Queued Phase = "Queued"
	// Superseded: a newer version took over; what this rollout touched is
	// left to it, not rolled back.
	Superseded Phase = "Superseded"
)

// Done tells whether the rollout has ended.
func (p Phase) Done() bool { return p == Succeeded || p == RolledBack || p == Superseded }

// ClusterPhase is where one cluster stands in a rollout.
type ClusterPhase string

const (
	ClusterPending      ClusterPhase = "Pending"      // its wave has not started
	ClusterApplying     ClusterPhase = "Applying"     // the pipeline is applying the canary
	ClusterProgressing  ClusterPhase = "Progressing"  // applied; Flagger is analysing
	ClusterSucceeded    ClusterPhase = "Succeeded"    // the primary runs the new digest
	ClusterFailed       ClusterPhase = "Failed"       // analysis or pipeline failed
	ClusterReverting    ClusterPhase = "Reverting"    // rollback applied the previous image
	ClusterReverted     ClusterPhase = "Reverted"     // the primary runs the previous image again
	ClusterRevertFailed ClusterPhase = "RevertFailed" // the revert failed or missed its deadline
	// ClusterRemoved: the cluster left the fleet's configuration before it
	// finished (RemoveClusters); its wave goes on with the others.
	ClusterRemoved ClusterPhase = "Removed"
)

// Rollout is one digest of one application on its way through the fleet.
type Rollout struct {
	ID          string    `json:"id"`
	Application string    `json:"application"`
	Image       string    `json:"image"` // registry/repository
	Tag         string    `json:"tag"`
	Digest      string    `json:"digest"`
	Phase       Phase     `json:"phase"`
	Reason      string    `json:"reason,omitempty"`
	Wave        int       `json:"wave"` // index of the current wave
	Waves       []Wave    `json:"waves"`
	Created     time.Time `json:"created"`
	Updated     time.Time `json:"updated"`
	// Version grows by one with every update (optimistic concurrency: see
	// pkg/state).
	Version int64 `json:"version"`
	// Failures are the events functions gave up on in this rollout, newest
	// last; `flotilla retry` replays those not retried yet.
	Failures []Failure `json:"failures,omitempty"`
	// Retries counts the user's retries of the rollout.
	Retries int `json:"retries,omitempty"`
	// Paused says who paused the rollout (and why): no cluster starts
	// until it is resumed; those rolling out finish.
	Paused string `json:"paused,omitempty"`
	// Waiting says why clusters of the current wave wait to start (paused,
	// the line stopped, approvals), "" when none does.
	Waiting string `json:"waiting,omitempty"`
	// PreviousTag and PreviousDigest are what the fleet ran before this
	// rollout (the application's deployed version when it was planned):
	// rolling back a succeeded rollout makes them the deployed version
	// again.
	PreviousTag string `json:"previousTag,omitempty"`
	// Members are a release set's members, in the order each cluster
	// applies them (docs/design/release-sets.md): the rollout carries
	// them all at its commit; none for an application.
	Members        []string `json:"members,omitempty"`
	PreviousDigest string   `json:"previousDigest,omitempty"`
	// Versions, for a release set of image members, is the set's version
	// (Digest is its manifest's hash, Tag its members' tags);
	// PreviousVersions the one the fleet ran before (the set's deployed
	// version when it was planned), what a rollback restores.
	Versions         SetVersion `json:"versions,omitempty"`
	PreviousVersions SetVersion `json:"previousVersions,omitempty"`
	// RollbackOf names the succeeded rollout this one rolls back (a user's
	// `flotilla rollback`).
	RollbackOf string `json:"rollbackOf,omitempty"`
	// ImageCreated is when the image was built, read for track Newest.
	ImageCreated time.Time `json:"imageCreated,omitzero"`
	// SignedBy is who signed the digest, for an application that verifies
	// signatures; Unsigned why no signature of it is trusted (the rollout
	// then ends before the first wave that requires one).
	SignedBy string `json:"signedBy,omitempty"`
	Unsigned string `json:"unsigned,omitempty"`
	// StopsBefore names the first wave requiring a signature, which this
	// unsigned rollout does not reach: it succeeds without the fleet
	// running its version, and the version signed later rolls out again.
	StopsBefore string `json:"stopsBefore,omitempty"`
	// PushedBy is who pushed the version, as the webhook's sender names
	// them (GitHub, Gitea, GitLab: the pusher; Harbor: the operator;
	// distribution: the actor); "" when unknown (a poll, a sender that
	// names no one, a rollout no push started): separation of duties then
	// refuses no approver.
	PushedBy string `json:"pushedBy,omitempty"`
	// Source says what brought the version: SourceWebhook (a sender's
	// webhook) or SourcePoll (flotilla's poll of the registry found it);
	// "" for rollouts that no push started (a fleet rollback).
	Source string `json:"source,omitempty"`
	// Kind is "" for a version's rollout, KindCatchUp or KindDriftRevert
	// for one that carries the validated digest to some clusters without
	// a push (reconcile.go).
	Kind string `json:"kind,omitempty"`
	// Limited: the rollout goes only to the clusters a git push changed
	// what they render of; the others run what its commit renders
	// already (DeployedTo keeps them).
	Limited bool `json:"limited,omitempty"`
}

// What brought a rollout's version (Rollout.Source).
const (
	SourceWebhook = "webhook"
	SourcePoll    = "poll" // events.SourcePoll
)

// Failure is an event a function gave up on.
type Failure struct {
	Function  string    `json:"function"`
	EventID   string    `json:"eventId"`
	EventType string    `json:"eventType"`
	Cluster   string    `json:"cluster,omitempty"`
	Error     string    `json:"error"`
	At        time.Time `json:"at"`
	// Retried: a retry replayed the event.
	Retried bool `json:"retried,omitempty"`
	// Event is the event given up on (structured JSON), for the retry.
	Event json.RawMessage `json:"event,omitempty"`
}

// Wave is one ordered step of the rollout.
type Wave struct {
	Name     string    `json:"name"`
	Clusters []Cluster `json:"clusters"`
	// MaxParallel is how many of its clusters may roll out at once (0: all
	// of them); MaxFailures how many may fail while the wave succeeds.
	// Fixed when the rollout is planned.
	MaxParallel int `json:"maxParallel,omitempty"`
	MaxFailures int `json:"maxFailures,omitempty"`
	// BakeTime is how long the wave must stay healthy once its clusters
	// are done; BakingUntil is when its bake ends (zero before it starts),
	// Baked that it ended healthy.
	BakeTime    time.Duration `json:"bakeTime,omitempty"`
	BakingUntil time.Time     `json:"bakingUntil,omitzero"`
	Baked       bool          `json:"baked,omitempty"`
	// Approvals is how many distinct approvers the wave needs before its
	// clusters start; Approvers are those who approved it (their
	// principals' names). ApprovalsFrom names who may (group:<name>,
	// user:<name>; empty: anyone but automation); SeparationOfDuties
	// refuses the rollout's pusher (PushedBy). Fixed when the rollout is
	// planned (approvers.go).
	Approvals          int      `json:"approvals,omitempty"`
	Approvers          []string `json:"approvers,omitempty"`
	ApprovalsFrom      []string `json:"approvalsFrom,omitempty"`
	SeparationOfDuties bool     `json:"separationOfDuties,omitempty"`
	// FreezeOverride says who let the wave start inside a freeze window,
	// and why.
	FreezeOverride string `json:"freezeOverride,omitempty"`
	// SignatureRequired: the wave takes only signed images (for an
	// application that verifies signatures).
	SignatureRequired bool `json:"signatureRequired,omitempty"`
	// PullRequest is the wave's pull request, for a GitOps application in
	// mode pullRequest: the wave's clusters start once it is merged.
	// RevertPullRequest is the one a rollback opened to write the previous
	// images back.
	PullRequest       *PullRequest `json:"pullRequest,omitempty"`
	RevertPullRequest *PullRequest `json:"revertPullRequest,omitempty"`
}

// PullRequestState is where a wave's pull request stands.
type PullRequestState string

const (
	PullRequestRequested PullRequestState = "Requested" // asked for, not opened yet
	PullRequestOpen      PullRequestState = "Open"      // waiting to be merged
	PullRequestMerged    PullRequestState = "Merged"
	PullRequestClosed    PullRequestState = "Closed" // closed without merging
	// PullRequestUnchanged: the base held every change already, so none
	// was opened.
	PullRequestUnchanged PullRequestState = "Unchanged"
	PullRequestFailed    PullRequestState = "Failed" // could not be opened or read (Message)
)

// PullRequest is a wave's pull request.
type PullRequest struct {
	State       PullRequestState `json:"state"`
	Number      int64            `json:"number,omitempty"`
	URL         string           `json:"url,omitempty"`
	Branch      string           `json:"branch,omitempty"`
	MergeCommit string           `json:"mergeCommit,omitempty"`
	// AutoMerge is what asking the host to merge it did: asked, merged,
	// scheduled, unsupported and why, failing or failed (events.Merge*).
	AutoMerge string `json:"autoMerge,omitempty"`
	// MergeError is the host's last answer to a failed merge; NextMerge
	// is when flotilla asks again (zero: only a user's retry does).
	MergeError string    `json:"mergeError,omitempty"`
	NextMerge  time.Time `json:"nextMerge,omitzero"`
	// Head is the commit it proposed (its head when it opened).
	Head string `json:"head,omitempty"`
	// Deadline is when the wave stops waiting for the merge.
	Deadline time.Time `json:"deadline,omitzero"`
	Message  string    `json:"message,omitempty"`
	Updated  time.Time `json:"updated,omitzero"`
}

// Merged reports whether the wave may start: its pull request merged (or
// there was nothing to merge).
func (p *PullRequest) Merged() bool {
	return p != nil && (p.State == PullRequestMerged || p.State == PullRequestUnchanged)
}

// Approved reports whether the wave has the approvals it needs.
func (w Wave) Approved() bool { return len(w.Approvers) >= w.Approvals }

// Baking reports whether wave w of r is in its bake.
func (r *Rollout) Baking(w int) bool {
	return r.Phase == Progressing && r.Wave == w && !r.Waves[w].BakingUntil.IsZero() && !r.Waves[w].Baked
}

// Active counts the clusters of the wave rolling out (applying, or applied
// and analysed by Flagger).
func (w Wave) Active() int {
	n := 0
	for _, c := range w.Clusters {
		if c.Phase == ClusterApplying || c.Phase == ClusterProgressing {
			n++
		}
	}
	return n
}

// Room is how many more of the wave's clusters may start now.
func (w Wave) Room() int {
	limit := w.MaxParallel
	if limit <= 0 {
		limit = len(w.Clusters)
	}
	return max(limit-w.Active(), 0)
}

// Pending lists the clusters of the wave not started yet.
func (w Wave) Pending() []string {
	var out []string
	for _, c := range w.Clusters {
		if c.Phase == ClusterPending {
			out = append(out, c.Name)
		}
	}
	return out
}

// Cluster is one cluster's state in a rollout.
type Cluster struct {
	Name          string       `json:"name"`
	Phase         ClusterPhase `json:"phase"`
	PreviousImage string       `json:"previousImage,omitempty"` // what the workload ran before; rollback restores it
	// PreviousVersions, of a release set of image members, is what the
	// cluster's members ran before (the apply run read each member's
	// primary; the fleet's previous version when the run failed): what
	// the cluster's revert restores. PreviousImage is then the set's
	// name at its digest (SetStatus).
	PreviousVersions SetVersion `json:"previousVersions,omitempty"`
	CanaryPhase      string     `json:"canaryPhase,omitempty"` // last Flagger phase seen
	CanaryWeight     int        `json:"canaryWeight,omitempty"`
	// Workloads is the last Flagger phase seen of each canary of a release
	// of several workloads (a git application's commit rendering several
	// Deployments or DaemonSets), by workload name; CanaryPhase is then the
	// least advanced of them (CanaryStatus, Combine). Nil for a release of
	// one workload: a rollout of 1,000 clusters of an image grows by
	// nothing.
	Workloads map[string]string `json:"workloads,omitempty"`
	// Jobs, of a release set's rollout, is the state of each Job of its
	// Job members (workload kind Job) in the cluster, by name, as last
	// read at the end of an apply run or a deadline (RecordJobs): pending,
	// running, complete or "failed: <reason>".
	Jobs    map[string]string `json:"jobs,omitempty"`
	Applied time.Time         `json:"applied,omitzero"` // when the pipeline last applied to it
	Message string            `json:"message,omitempty"`
	// Failure says why the cluster's own result counted as a failure of
	// its wave (Record): it stays when the cluster is reverted, so the
	// cluster that failed stands apart from those reverted because of it.
	Failure string    `json:"failure,omitempty"`
	Updated time.Time `json:"updated"`
	// Step numbers the runs requested for the cluster in this rollout; a
	// late answer or deadline of an earlier step is ignored.
	Step int `json:"step,omitempty"`
	// Run is the purpose of the pipeline run in flight ("apply",
	// "revert"), "" when none is.
	Run string `json:"run,omitempty"`
	// Deadline is when the cluster's current step must be done.
	Deadline time.Time `json:"deadline,omitzero"`
	// Retry is the user's retry (its attempt number) that started the
	// cluster again after it failed; its apply restarts the workload's pods
	// so Flagger analyses the same image anew.
	Retry int `json:"retry,omitempty"`
	// Nudges counts the applies of the same image again because Flagger
	// missed the revision (Rollout.Canary); each restarts the workload's
	// pods so Flagger sees a new one.
	Nudges int `json:"nudges,omitempty"`
}

// Ref is the pinned image reference the rollout deploys.
func (r *Rollout) Ref() string { return r.Image + "@" + r.Digest }

// Cluster finds a cluster of the rollout and the index of its wave.
func (r *Rollout) Cluster(name string) (*Cluster, int, error) {
	for w := range r.Waves {
		for c := range r.Waves[w].Clusters {
			if r.Waves[w].Clusters[c].Name == name {
				return &r.Waves[w].Clusters[c], w, nil
			}
		}
	}
	return nil, -1, fmt.Errorf("rollout %s has no cluster %q", r.ID, name)
}

// clusterAt is where a cluster is in a rollout: its wave and its index in
// the wave.
type clusterAt struct{ wave, i int }

// clusterIndex is where each cluster of r is, for the decisions that visit
// many clusters: Cluster searches them all, and a wave of 1,000 started
// one Cluster at a time is a million comparisons. It holds indexes, valid
// while r's waves keep their clusters.
func (r *Rollout) clusterIndex() map[string]clusterAt {
	n := 0
	for w := range r.Waves {
		n += len(r.Waves[w].Clusters)
	}
	ix := make(map[string]clusterAt, n)
	for w := range r.Waves {
		for i := range r.Waves[w].Clusters {
			ix[r.Waves[w].Clusters[i].Name] = clusterAt{w, i}
		}
	}
	return ix
}

// clusterIn is Cluster through ix, an index of r.
func (r *Rollout) clusterIn(ix map[string]clusterAt, name string) (*Cluster, int, error) {
	at, ok := ix[name]
	if !ok {
		return nil, -1, fmt.Errorf("rollout %s has no cluster %q", r.ID, name)
	}
	return &r.Waves[at.wave].Clusters[at.i], at.wave, nil
}

// Lookup is Cluster for a caller that looks many clusters up: it indexes
// r's clusters once. Valid while r's waves keep their clusters.
func (r *Rollout) Lookup() func(name string) (*Cluster, int, error) {
	ix := r.clusterIndex()
	return func(name string) (*Cluster, int, error) { return r.clusterIn(ix, name) }
}

// WaveOutcome tells whether every cluster of wave w has finished (or left
// the fleet) and how many of them failed.
func (r *Rollout) WaveOutcome(w int) (done bool, failed int) {
	done = true
	for _, c := range r.Waves[w].Clusters {
		switch c.Phase {
		case ClusterSucceeded, ClusterRemoved:
		case ClusterFailed:
			failed++
		default:
			done = false
		}
	}
	return done, failed
}

// RevertWave returns the newest wave at or before `from` that still has
// clusters to revert (those that took the new digest), or -1.
func (r *Rollout) RevertWave(from int) int {
	for w := min(from, len(r.Waves)-1); w >= 0; w-- {
		if len(r.ToRevert(w)) > 0 {
			return w
		}
	}
	return -1
}

// ToRevert lists the clusters of wave w that took the new digest and are not
// reverted yet (or being reverted).
func (r *Rollout) ToRevert(w int) []string {
	var out []string
	for _, c := range r.Waves[w].Clusters {
		switch c.Phase {
		case ClusterApplying, ClusterProgressing, ClusterSucceeded, ClusterFailed:
			if c.PreviousImage != "" {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// Reverting reports whether wave w still has clusters being reverted.
func (r *Rollout) Reverting(w int) bool {
	for _, c := range r.Waves[w].Clusters {
		if c.Phase == ClusterReverting {
			return true
		}
	}
	return false
}

// Running lists the clusters with a pipeline run in flight for purpose.
func (r *Rollout) Running(purpose string) []string {
	var out []string
	for _, w := range r.Waves {
		for _, c := range w.Clusters {
			if c.Run == purpose {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// Startable lists the clusters that may start now: those of the current
// wave not started yet, and the retried clusters of waves that have passed
// (which no parallelism limit holds back).
func (r *Rollout) Startable() []string {
	var out []string
	for w := 0; w <= r.Wave && w < len(r.Waves); w++ {
		out = append(out, r.Waves[w].Pending()...)
	}
	return out
}

// RetriesUnderWay reports whether a retried cluster of a wave that has
// passed has not finished yet (the rollout does not end before it does).
func (r *Rollout) RetriesUnderWay() bool {
	for w := 0; w < r.Wave && w < len(r.Waves); w++ {
		for _, c := range r.Waves[w].Clusters {
			switch c.Phase {
			case ClusterPending, ClusterApplying, ClusterProgressing:
				return true
			}
		}
	}
	return false
}

// Retry sets the failed clusters of the waves that have started (only
// cluster, when set) back to Pending for the user's retry attempt; a bake
// of the current wave starts again once they are done. It returns the
// clusters it set back.
func (r *Rollout) Retry(cluster string, attempt int, by string) []string {
	var out []string
	for w := 0; w <= r.Wave && w < len(r.Waves); w++ {
		for i := range r.Waves[w].Clusters {
			c := &r.Waves[w].Clusters[i]
			if c.Phase != ClusterFailed || (cluster != "" && c.Name != cluster) {
				continue
			}
			c.Phase, c.Retry, c.Nudges, c.Message = ClusterPending, attempt, 0, "retried by "+by
			out = append(out, c.Name)
			if w == r.Wave {
				r.Waves[w].BakingUntil, r.Waves[w].Baked = time.Time{}, false
			}
		}
	}
	return out
}

// InPhase lists the clusters in phase p.
func (r *Rollout) InPhase(p ClusterPhase) []*Cluster {
	var out []*Cluster
	for w := range r.Waves {
		for c := range r.Waves[w].Clusters {
			if r.Waves[w].Clusters[c].Phase == p {
				out = append(out, &r.Waves[w].Clusters[c])
			}
		}
	}
	return out
}

// AppState is what flotilla knows of an application across rollouts.
type AppState struct {
	Name string `json:"name"`
	// Deployed is the tag and digest the whole fleet last converged on.
	DeployedTag    string `json:"deployedTag,omitempty"`
	DeployedDigest string `json:"deployedDigest,omitempty"`
	// DeployedCreated is when the deployed image was built (track Newest).
	DeployedCreated time.Time `json:"deployedCreated,omitzero"`
	// DeployedVersions, for a release set of image members, is the set's
	// deployed version, each member's (DeployedDigest its hash).
	DeployedVersions SetVersion `json:"deployedVersions,omitempty"`
	// DeployedClusters are the clusters the deployed digest was rolled out
	// to (its rollout's, and those caught up since); nil when unknown (a
	// state from before flotilla kept it): every cluster counts then. A
	// cluster of the waves not among them entered them since (reconcile.go).
	DeployedClusters []string `json:"deployedClusters,omitempty"`
	// Drift is what the latest check of the clusters found (pkg/reconcile),
	// nil before the first.
	Drift *DriftStatus `json:"drift,omitempty"`
	// LatestTag is the newest tag a rollout was started for. A push is
	// compared with Deployed (a hotfix after a rolled back version is
	// accepted) and with the rollout in flight, which it must be newer than.
	LatestTag     string `json:"latestTag,omitempty"`
	LatestRollout string `json:"latestRollout,omitempty"`
	// LatestVersions, for a release set of image members, is each
	// member's newest version a rollout of the set was started for by a
	// push of it (LatestTag of the member: its poll takes no older tag).
	LatestVersions SetVersion `json:"latestVersions,omitempty"`
	// Queued is the rollout waiting for the one in flight to end, if any.
	Queued string `json:"queued,omitempty"`
	// Quarantined are the versions never to roll out again.
	Quarantined []Quarantine `json:"quarantined,omitempty"`
	// DeployedRollout is the rollout that brought the fleet to Deployed,
	// DeployedAt when it succeeded.
	DeployedRollout string    `json:"deployedRollout,omitempty"`
	DeployedAt      time.Time `json:"deployedAt,omitzero"`
	// LastSeen is the last push of the application flotilla saw (either
	// source), LastWebhook the last a webhook brought; LastSkipped the
	// last push that started no rollout, and why; WebhookSilent the alarm
	// of a webhook that missed a version a poll found (nil: none).
	// See application.go.
	LastSeen      *Seen    `json:"lastSeen,omitempty"`
	LastWebhook   *Seen    `json:"lastWebhook,omitempty"`
	LastSkipped   *Skipped `json:"lastSkipped,omitempty"`
	WebhookSilent *Silence `json:"webhookSilent,omitempty"`
}

// Quarantine marks a version bad: a tag (any digest of it) or one digest.
type Quarantine struct {
	Tag    string    `json:"tag,omitempty"`
	Digest string    `json:"digest,omitempty"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Matches reports whether the quarantine covers tag at digest.
func (q Quarantine) Matches(tag, digest string) bool {
	return q.Digest != "" && q.Digest == digest || q.Digest == "" && q.Tag != "" && q.Tag == tag
}

// QuarantineOf returns the quarantine covering tag at digest, if any.
func (s AppState) QuarantineOf(tag, digest string) (Quarantine, bool) {
	for _, q := range s.Quarantined {
		if q.Matches(tag, digest) {
			return q, true
		}
	}
	return Quarantine{}, false
}

// FleetState is what flotilla knows of the whole fleet: whether the line is
// stopped (no cluster starts a rollout until it is started again).
type FleetState struct {
	Stopped bool      `json:"stopped,omitempty"`
	By      string    `json:"by,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at,omitzero"`
}

// ErrNotFound is returned for an unknown rollout.
var ErrNotFound = fault.New(fault.ErrNotFound, "rollout not found")

// Page is one page of the rollout list.
type Page struct {
	Rollouts []Rollout
	// Next continues the list (pass it as before), "" at its end.
	Next string
}

// WaveSummary is "2/3 prod-eu": the current wave's number, the count and
// its name ("" without waves), as the fleet's FleetRollout and an
// Application resource's status show it.
func (ro Rollout) WaveSummary() string {
	if len(ro.Waves) == 0 {
		return ""
	}
	i := min(max(ro.Wave, 0), len(ro.Waves)-1)
	s := strconv.Itoa(i+1) + "/" + strconv.Itoa(len(ro.Waves))
	if n := ro.Waves[i].Name; n != "" {
		s += " " + n
	}
	return s
}

// ClustersSummary is "5/8": the clusters that succeeded of all the
// rollout's.
func (ro Rollout) ClustersSummary() string {
	done, all := 0, 0
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			all++
			if c.Phase == ClusterSucceeded {
				done++
			}
		}
	}
	return strconv.Itoa(done) + "/" + strconv.Itoa(all)
}
