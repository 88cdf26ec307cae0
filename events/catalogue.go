package events

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Event types of the catalogue. Every type is versioned; a payload change that
// breaks consumers gets a new version.
const (
	// Intake: what senders tell us.
	TypeImagePushed = "dev.flotilla.image.pushed.v1"
	TypeGitPushed   = "dev.flotilla.git.pushed.v1"
	// TypeGitPullRequest: a git host says a pull request was opened,
	// closed or merged (payload GitPullRequest). A hint only: flotilla
	// reads the pull request through the host's API before acting.
	TypeGitPullRequest = "dev.flotilla.git.pullrequest.v1"
	TypeCanary         = "dev.flotilla.canary.v1"
	TypePipelineRun    = "dev.flotilla.pipelinerun.v1"

	// verify
	TypeImageVerified = "dev.flotilla.image.verified.v1"
	TypeImageRejected = "dev.flotilla.image.rejected.v1"
	// TypeGitVerified: a pushed commit exists on the branch (or is the
	// tag's) in the repository, and changes what applications track
	// (payload GitVerified); TypeGitRejected: a push flotilla refuses to
	// act on (GitRejected).
	TypeGitVerified = "dev.flotilla.git.verified.v1"
	TypeGitRejected = "dev.flotilla.git.rejected.v1"

	// plan
	TypeRolloutStarted = "dev.flotilla.rollout.started.v1"
	TypeRolloutSkipped = "dev.flotilla.rollout.skipped.v1"
	// TypeRolloutQueued: a newer version waits for the rollout in flight
	// (payload RolloutResult, Reason naming it); TypeRolloutSuperseded: a
	// rollout ended because a newer version took over (RolloutResult).
	TypeRolloutQueued     = "dev.flotilla.rollout.queued.v1"
	TypeRolloutSuperseded = "dev.flotilla.rollout.superseded.v1"

	// launch / advance
	TypeWaveStarted = "dev.flotilla.wave.started.v1"
	// TypeWaveContinued: a cluster of a wave that runs maxParallel at a
	// time finished, so more of its clusters may start (payload WaveStarted).
	TypeWaveContinued  = "dev.flotilla.wave.continued.v1"
	TypeClusterApplied = "dev.flotilla.cluster.applied.v1"
	TypeWaveSucceeded  = "dev.flotilla.wave.succeeded.v1"
	// TypeWaveBaked is the timer at the end of a wave's bake time
	// (payload WaveResult).
	TypeWaveBaked        = "dev.flotilla.wave.baked.v1"
	TypeRolloutSucceeded = "dev.flotilla.rollout.succeeded.v1"
	TypeRolloutFailed    = "dev.flotilla.rollout.failed.v1"

	// observe
	TypeClusterSucceeded = "dev.flotilla.cluster.succeeded.v1"
	TypeClusterFailed    = "dev.flotilla.cluster.failed.v1"

	// rollback
	TypeClusterReverted   = "dev.flotilla.cluster.reverted.v1"
	TypeRolloutRolledBack = "dev.flotilla.rollout.rolledback.v1"
)

// ExtRolloutID is the CloudEvents extension that carries the rollout id on
// every event of a rollout, so one push can be followed end to end.
const ExtRolloutID = "rolloutid"

// Source is the CloudEvents source of events flotilla derives itself; intake
// events use "/hooks/<receiver>".
const Source = "/flotilla"

// ImagePushed: a registry says a tag was pushed.
type ImagePushed struct {
	// Registry host, e.g. "registry.example.com:5000" or "docker.io".
	Registry string `json:"registry"`
	// Repository path inside the registry, e.g. "team/app".
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// Digest as the sender reported it, if it did ("sha256:...").
	Digest     string `json:"digest,omitempty"`
	MediaType  string `json:"mediaType,omitempty"`
	Pusher     string `json:"pusher,omitempty"`
	Sender     string `json:"sender"`
	Receiver   string `json:"receiver"`
	DeliveryID string `json:"deliveryId,omitempty"`
	// Source says what brought the push: "" a sender's webhook, SourcePoll
	// flotilla's own poll of the registry (pkg/poll).
	Source string `json:"source,omitempty"`
}

// SourcePoll marks a push flotilla found by polling the registry, not
// from a webhook (ImagePushed.Source, ImageVerified.Source).
const SourcePoll = "poll"

// Image is "registry/repository", the name go-containerregistry parses.
func (p ImagePushed) Image() string { return p.Registry + "/" + p.Repository }

// GitPushed: a git host says a ref was pushed.
type GitPushed struct {
	RepoURL      string   `json:"repoUrl"`
	Ref          string   `json:"ref"`
	Branch       string   `json:"branch,omitempty"`
	Tag          string   `json:"tag,omitempty"`
	Before       string   `json:"before,omitempty"`
	After        string   `json:"after,omitempty"`
	ChangedPaths []string `json:"changedPaths,omitempty"`
	Pusher       string   `json:"pusher,omitempty"`
	Sender       string   `json:"sender"`
	Receiver     string   `json:"receiver"`
	DeliveryID   string   `json:"deliveryId,omitempty"`
	// Source says what brought the push: "" a git host's webhook,
	// SourcePoll flotilla's own poll of the branch (pkg/poll).
	Source string `json:"source,omitempty"`
}

// GitPullRequest: a git host says a pull request changed state.
type GitPullRequest struct {
	RepoURL string `json:"repoUrl"`
	Number  int64  `json:"number"`
	URL     string `json:"url,omitempty"`
	// Action is the host's: opened, closed, reopened, merged, ...
	Action      string `json:"action"`
	Merged      bool   `json:"merged,omitempty"`
	MergeCommit string `json:"mergeCommit,omitempty"`
	HeadRef     string `json:"headRef"`
	HeadSHA     string `json:"headSha,omitempty"`
	BaseRef     string `json:"baseRef,omitempty"`
	Actor       string `json:"actor,omitempty"`
	Sender      string `json:"sender"`
	Receiver    string `json:"receiver"`
	DeliveryID  string `json:"deliveryId,omitempty"`
}

// CanaryOutcome classifies a Flagger event from its phase and message.
type CanaryOutcome string

const (
	CanaryProgressing CanaryOutcome = "progressing"
	CanaryInitialized CanaryOutcome = "initialized"
	CanarySucceeded   CanaryOutcome = "succeeded"
	CanaryFailed      CanaryOutcome = "failed"
)

// Canary: Flagger reports a step of a canary in one cluster.
type Canary struct {
	Cluster   string        `json:"cluster"`
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Phase     string        `json:"phase"`
	Outcome   CanaryOutcome `json:"outcome"`
	Message   string        `json:"message,omitempty"`
	EventType string        `json:"eventType,omitempty"`
	Checksum  string        `json:"checksum,omitempty"`
	RolloutID string        `json:"rolloutId,omitempty"`
	Receiver  string        `json:"receiver"`
}

// PipelineRunPhase is where a Tekton PipelineRun is, from the type of the
// CloudEvent Tekton sent.
type PipelineRunPhase string

const (
	PipelineRunQueued    PipelineRunPhase = "queued"
	PipelineRunStarted   PipelineRunPhase = "started"
	PipelineRunRunning   PipelineRunPhase = "running"
	PipelineRunSucceeded PipelineRunPhase = "succeeded"
	PipelineRunFailed    PipelineRunPhase = "failed"
	PipelineRunUnknown   PipelineRunPhase = "unknown"
)

// PipelineRun: Tekton reports a step of a PipelineRun.
type PipelineRun struct {
	// Cluster runs the PipelineRun: the receiver's ?cluster= query, when set.
	Cluster   string           `json:"cluster,omitempty"`
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	Pipeline  string           `json:"pipeline,omitempty"`
	Phase     PipelineRunPhase `json:"phase"`
	// Reason and Message are those of the run's Succeeded condition.
	Reason  string            `json:"reason,omitempty"`
	Message string            `json:"message,omitempty"`
	Results map[string]string `json:"results,omitempty"`
	// RolloutID is the run's flotilla.dev/rollout label, when flotilla
	// created it.
	RolloutID  string `json:"rolloutId,omitempty"`
	Receiver   string `json:"receiver"`
	DeliveryID string `json:"deliveryId,omitempty"`
}

// ImageVerified: the pushed tag resolves to this digest at the registry.
type ImageVerified struct {
	// Image is "registry/repository".
	Image  string `json:"image"`
	Tag    string `json:"tag"`
	Digest string `json:"digest"`
	// Created is when the image was built (its config's created time),
	// read for applications on track Newest; zero when not read.
	Created time.Time `json:"created,omitzero"`
	// SignedBy names, per application with a signature policy, who signed
	// the digest; Unsigned says, per application, why no signature is
	// trusted (its rollout stops before the first wave that requires one).
	SignedBy map[string]string `json:"signedBy,omitempty"`
	Unsigned map[string]string `json:"unsigned,omitempty"`
	// Source is the push's (ImagePushed.Source): "" a webhook, SourcePoll
	// flotilla's poll.
	Source string `json:"source,omitempty"`
	// PushedBy is who pushed, as the webhook's sender names them
	// (ImagePushed.Pusher, GitPushed.Pusher); "" when unknown.
	PushedBy string `json:"pushedBy,omitempty"`
}

// Ref is the pinned reference "registry/repository@digest".
func (v ImageVerified) Ref() string { return v.Image + "@" + v.Digest }

// ImageRejected: a push flotilla refuses to act on, and why.
type ImageRejected struct {
	Image  string `json:"image"`
	Tag    string `json:"tag"`
	Reason string `json:"reason"`
}

// GitVerified: flotilla fetched the repository and found the pushed commit
// on the branch (or named by the tag), changing paths Applications track.
type GitVerified struct {
	RepoURL string `json:"repoUrl"`
	Ref     string `json:"ref"`
	Branch  string `json:"branch,omitempty"`
	Tag     string `json:"tag,omitempty"`
	// Commit is the full commit id pushed.
	Commit string `json:"commit"`
	// Abbrev is Commit shortened for display (its first 12 characters).
	Abbrev string `json:"abbrev"`
	// ChangedPaths are what the push changed, as read from the repository
	// (or listed by the payload).
	ChangedPaths []string `json:"changedPaths,omitempty"`
	// Applications are the applications that roll the commit out.
	Applications []string `json:"applications"`
	// Clusters are, by application, the clusters whose tracked paths the
	// push changed: the rollout goes to those (and to those of a rollout
	// it supersedes). An application missing here (a tag's push) goes to
	// every cluster it targets.
	Clusters map[string][]string `json:"clusters,omitempty"`
	Pusher   string              `json:"pusher,omitempty"`
	// Source is the push's (GitPushed.Source).
	Source string `json:"source,omitempty"`
}

// Version is how a rollout of the commit names its version: the git tag,
// else branch@abbrev.
func (v GitVerified) Version() string {
	if v.Tag != "" {
		return v.Tag
	}
	return v.Branch + "@" + v.Abbrev
}

// GitRejected: a git push flotilla refuses to act on, and why.
type GitRejected struct {
	RepoURL string `json:"repoUrl"`
	Ref     string `json:"ref"`
	Commit  string `json:"commit,omitempty"`
	Reason  string `json:"reason"`
}

// TypeApplicationWebhookMissed: a poll found a version of an application
// that no webhook announced (payload WebhookMissed): its webhook is
// reported silent (flotilla_application_webhook_silent, the API's
// applications, `flotilla get applications`) until a webhook of the
// application arrives again. Whichever records the poll's push emits it:
// plan for a version verified, verify for one it refused or skipped.
const TypeApplicationWebhookMissed = "dev.flotilla.application.webhook.missed.v1"

// WebhookMissed: Application's webhook did not announce Version (at
// Digest) of Repository, which a poll found (its push journaled at
// Found, event PushID); LastWebhook is when a webhook of the application
// last brought a push (LastWebhookVersion), zero when none ever did.
type WebhookMissed struct {
	Application        string    `json:"application"`
	Repository         string    `json:"repository"`
	Version            string    `json:"version"`
	Digest             string    `json:"digest,omitempty"`
	Found              time.Time `json:"found"`
	PushID             string    `json:"pushId"`
	LastWebhook        time.Time `json:"lastWebhook,omitzero"`
	LastWebhookVersion string    `json:"lastWebhookVersion,omitempty"`
}

func init() { payloadTypes[TypeApplicationWebhookMissed] = func() any { return new(WebhookMissed) } }

// RolloutSkipped: an application tracks the image, but this version does not
// start a rollout (older, outside the track, ...).
type RolloutSkipped struct {
	Application string `json:"application"`
	Image       string `json:"image"`
	Tag         string `json:"tag"`
	Reason      string `json:"reason"`
}

// RolloutStarted: a new rollout of one digest to an application's fleet.
type RolloutStarted struct {
	RolloutID   string     `json:"rolloutId"`
	Application string     `json:"application"`
	Image       string     `json:"image"`
	Tag         string     `json:"tag"`
	Digest      string     `json:"digest"`
	Waves       [][]string `json:"waves"`
	// Kind is the rollout's kind: "" a version's, KindCatchUp or
	// KindDriftRevert.
	Kind string `json:"kind,omitempty"`
}

// WaveStarted: the clusters of one wave are to receive the rollout.
type WaveStarted struct {
	RolloutID string   `json:"rolloutId"`
	Wave      int      `json:"wave"`
	Clusters  []string `json:"clusters"`
}

// ClusterResult reports one cluster of a rollout: applied, succeeded, failed
// or reverted.
type ClusterResult struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
	Cluster   string `json:"cluster"`
	Reason    string `json:"reason,omitempty"`
}

// WaveResult: every cluster of a wave is done.
type WaveResult struct {
	RolloutID string `json:"rolloutId"`
	Wave      int    `json:"wave"`
}

// RolloutResult: the rollout ended (succeeded, failed or rolled back).
type RolloutResult struct {
	RolloutID string `json:"rolloutId"`
	Reason    string `json:"reason,omitempty"`
}

// New builds a CloudEvent of type typ carrying payload as JSON. id must be
// deterministic for events derived from other events (so a redelivered input
// yields the same output ids and the journal drops the duplicates).
func New(id, source, typ string, payload any) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetSource(source)
	e.SetType(typ)
	e.SetTime(time.Now().UTC())
	if err := e.SetData(cloudevents.ApplicationJSON, payload); err != nil {
		return e, fmt.Errorf("encoding %s payload: %w", typ, err)
	}
	return e, nil
}

// Derive builds an event caused by parent: its id is derived from the parent's
// id and a discriminator, and it inherits the parent's rollout id.
func Derive(parent cloudevents.Event, typ, discriminator string, payload any) (cloudevents.Event, error) {
	id := parent.ID() + "/" + typ
	if discriminator != "" {
		id += "/" + discriminator
	}
	e, err := New(id, Source, typ, payload)
	if err != nil {
		return e, err
	}
	if r := RolloutID(parent); r != "" {
		e.SetExtension(ExtRolloutID, r)
	}
	// The subject (the image or repository pushed) stays with what follows
	// from it: dispatch keys a push's verdict by it, as the push itself.
	if s := parent.Subject(); s != "" {
		e.SetSubject(s)
	}
	return e, nil
}

// RolloutID returns the rollout id extension of e, or "".
func RolloutID(e cloudevents.Event) string {
	v, ok := e.Extensions()[ExtRolloutID]
	if !ok {
		return ""
	}
	s, _ := v.(string)
	return s
}

// Decode reads e's JSON payload into T. A payload that does not decode is a
// permanent error: retrying cannot fix it.
func Decode[T any](e cloudevents.Event) (T, error) {
	var v T
	if err := json.Unmarshal(e.Data(), &v); err != nil {
		return v, fault.Permanent(fmt.Errorf("decoding %s payload of event %s: %w", e.Type(), e.ID(), err))
	}
	return v, nil
}

// Reconciling the clusters with the validated digest (pkg/reconcile).
const (
	// TypeReconcileRequested asks plan for a rollout of the application's
	// validated digest to some of its clusters, without a push (payload
	// ReconcileRequested): a catch-up, or a drift's revert.
	TypeReconcileRequested = "dev.flotilla.reconcile.requested.v1"
	// TypeDriftDetected: a cluster's primary runs something else than
	// the application's validated digest (payload DriftDetected).
	TypeDriftDetected = "dev.flotilla.drift.detected.v1"
)

// Kinds of a ReconcileRequested (rollout.KindCatchUp, KindDriftRevert).
const (
	KindCatchUp     = "catch-up"
	KindDriftRevert = "drift-revert"
)

// ReconcileRequested asks for a rollout of kind Kind (KindCatchUp,
// KindDriftRevert) of Application's validated Digest to Clusters; plan
// starts it while Digest is still the validated one and no rollout of the
// application is in flight. Its subject is the image, so plan takes it in
// order with the image's pushes.
type ReconcileRequested struct {
	Application string   `json:"application"`
	Kind        string   `json:"kind"`
	Image       string   `json:"image"`
	Tag         string   `json:"tag"`
	Digest      string   `json:"digest"`
	Clusters    []string `json:"clusters"`
	Reason      string   `json:"reason,omitempty"`
}

// DriftDetected: Cluster's primary of Application runs Image, not the
// validated Digest (Tag); Policy is the application's driftPolicy (report,
// or revert: a rollout of kind drift-revert follows).
type DriftDetected struct {
	Application string `json:"application"`
	Cluster     string `json:"cluster"`
	Image       string `json:"image"`
	Digest      string `json:"digest"`
	Tag         string `json:"tag,omitempty"`
	Policy      string `json:"policy"`
	// Member, of a release set's drift, is the member whose primary
	// drifted.
	Member string `json:"member,omitempty"`
}

// TypeFunctionFailed records that a function gave up on an event.
const TypeFunctionFailed = "dev.flotilla.function.failed.v1"

// FunctionFailed: a function could not handle an event (a permanent error, or
// retries exhausted). The event stays in the journal.
type FunctionFailed struct {
	Function  string `json:"function"`
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	Error     string `json:"error"`
	Permanent bool   `json:"permanent"`
	// Event is the event given up on (structured JSON), so that a user's
	// retry can replay it.
	Event json.RawMessage `json:"event,omitempty"`
	// Subject is that event's subject (the cluster of a pipeline run).
	Subject string `json:"subject,omitempty"`
}

// TypeEventQuarantined records that the runtime set aside a journaled record
// it could not read as an event, and went on with the next.
const TypeEventQuarantined = "dev.flotilla.event.quarantined.v1"

// EventQuarantined: the record at Seq is intact on disk but is not a
// readable event (Error says why). Nothing handled it.
type EventQuarantined struct {
	Seq   uint64 `json:"seq"`
	Error string `json:"error"`
}

// TypeJournalDamaged stands in the journal for a record `flotilla store
// repair` could not recover, keeping its sequence number.
const TypeJournalDamaged = "dev.flotilla.journal.damaged.v1"

// JournalDamaged: the record at Seq was damaged (or missing) in Segment at
// Offset; Reason says how.
type JournalDamaged struct {
	Seq     uint64 `json:"seq"`
	Segment string `json:"segment"`
	Offset  int64  `json:"offset"`
	Reason  string `json:"reason"`
}

// payloadTypes maps every type of the catalogue to its payload.
var payloadTypes = map[string]func() any{
	TypeImagePushed:       func() any { return new(ImagePushed) },
	TypeGitPushed:         func() any { return new(GitPushed) },
	TypeGitPullRequest:    func() any { return new(GitPullRequest) },
	TypeCanary:            func() any { return new(Canary) },
	TypePipelineRun:       func() any { return new(PipelineRun) },
	TypeImageVerified:     func() any { return new(ImageVerified) },
	TypeImageRejected:     func() any { return new(ImageRejected) },
	TypeGitVerified:       func() any { return new(GitVerified) },
	TypeGitRejected:       func() any { return new(GitRejected) },
	TypeRolloutStarted:    func() any { return new(RolloutStarted) },
	TypeRolloutSkipped:    func() any { return new(RolloutSkipped) },
	TypeWaveStarted:       func() any { return new(WaveStarted) },
	TypeWaveContinued:     func() any { return new(WaveStarted) },
	TypeClusterApplied:    func() any { return new(ClusterResult) },
	TypeWaveSucceeded:     func() any { return new(WaveResult) },
	TypeWaveBaked:         func() any { return new(WaveResult) },
	TypeRolloutSucceeded:  func() any { return new(RolloutResult) },
	TypeRolloutFailed:     func() any { return new(RolloutResult) },
	TypeClusterSucceeded:  func() any { return new(ClusterResult) },
	TypeClusterFailed:     func() any { return new(ClusterResult) },
	TypeClusterReverted:   func() any { return new(ClusterResult) },
	TypeRolloutRolledBack: func() any { return new(RolloutResult) },
	TypeRolloutQueued:     func() any { return new(RolloutResult) },
	TypeRolloutSuperseded: func() any { return new(RolloutResult) },
	TypeFunctionFailed:    func() any { return new(FunctionFailed) },
	TypeEventQuarantined:  func() any { return new(EventQuarantined) },
	TypeJournalDamaged:    func() any { return new(JournalDamaged) },

	TypePipelineRunRequested:       func() any { return new(PipelineRunRequested) },
	TypePipelineRunStarted:         func() any { return new(PipelineRunStart) },
	TypePipelineRunFinished:        func() any { return new(PipelineRunFinished) },
	TypePruneRequested:             func() any { return new(PruneRequested) },
	TypeClusterPruned:              func() any { return new(ClusterPruned) },
	TypeClusterDeadline:            func() any { return new(ClusterDeadline) },
	TypeRolloutRetryRequested:      func() any { return new(RolloutRetryRequested) },
	TypeRolloutRollbackFailed:      func() any { return new(RolloutResult) },
	TypeRolloutPauseRequested:      func() any { return new(Control) },
	TypeRolloutResumeRequested:     func() any { return new(Control) },
	TypeRolloutAbortRequested:      func() any { return new(Control) },
	TypeRolloutOverrideRequested:   func() any { return new(Control) },
	TypeRolloutRollbackRequested:   func() any { return new(Control) },
	TypeFleetStopRequested:         func() any { return new(Control) },
	TypeFleetStartRequested:        func() any { return new(Control) },
	TypeClustersRemoved:            func() any { return new(ClustersRemoved) },
	TypeWaveApprovalRequested:      func() any { return new(WaveApproval) },
	TypePullRequestRequested:       func() any { return new(PullRequestRequested) },
	TypePullRequestStatus:          func() any { return new(PullRequestStatus) },
	TypeVersionQuarantineRequested: func() any { return new(QuarantineRequested) },
	TypeReconcileRequested:         func() any { return new(ReconcileRequested) },
	TypeDriftDetected:              func() any { return new(DriftDetected) },
}

// DecodePayload reads e's payload into the catalogue's type for e's type and
// returns it (the struct, not a pointer). A type outside the catalogue, or a
// payload that does not decode, is a permanent error.
func DecodePayload(e cloudevents.Event) (any, error) {
	newPayload, ok := payloadTypes[e.Type()]
	if !ok {
		return nil, fault.Permanent(fmt.Errorf("event %s: type %q is not in the catalogue", e.ID(), e.Type()))
	}
	p := newPayload()
	if err := json.Unmarshal(e.Data(), p); err != nil {
		return nil, fault.Permanent(fmt.Errorf("decoding %s payload of event %s: %w", e.Type(), e.ID(), err))
	}
	return reflect.ValueOf(p).Elem().Interface(), nil
}

// TypeAuditRecorded: a decision on a user's control, for the audit (payload
// AuditRecorded; #31). The API journals it beside the control's own event
// (one append) when the control is allowed, alone when it is refused. It
// carries the rollout's id when the control is about a rollout, so the
// rollout's timeline shows it; no function consumes it.
const TypeAuditRecorded = "dev.flotilla.audit.recorded.v1"

// Decisions of an AuditRecorded.
const (
	AuditAllowed = "allowed"
	AuditRefused = "refused"
)

// AuditPrincipal is who sent a control (pkg/identity.Principal, copied:
// the catalogue imports no domain package).
type AuditPrincipal struct {
	Subject string `json:"subject,omitempty"`
	Name    string `json:"name"`
	// Username is a person's login name at the provider
	// (server.sso.usernameClaim), which separation of duties compares
	// with the pusher.
	Username   string   `json:"username,omitempty"`
	Groups     []string `json:"groups,omitempty"`
	Token      string   `json:"token,omitempty"`
	Automation bool     `json:"automation,omitempty"`
	// Via is how the request proved it: token, session or anonymous.
	Via string `json:"via,omitempty"`
}

// AuditRecorded: Principal asked for Action (a permission's name: pause,
// resume, retry, refresh, abort, approve, override, rollback, quarantine,
// stop-line) on Application's rollout RolloutID (its wave WaveNumber, where
// the control names one) from RemoteAddr with UserAgent, giving Reason;
// Decision is AuditAllowed or AuditRefused, Why says why when it says
// anything. EventID is the control's own event, when one was journaled.
type AuditRecorded struct {
	Principal   AuditPrincipal `json:"principal"`
	Action      string         `json:"action"`
	Application string         `json:"application,omitempty"`
	RolloutID   string         `json:"rolloutId,omitempty"`
	// WaveNumber counts from 1 (0: no wave; the catalogue's "wave" fields
	// are indexes from 0, this one is as users name waves).
	WaveNumber int    `json:"waveNumber,omitempty"`
	WaveName   string `json:"waveName,omitempty"`
	Cluster    string `json:"cluster,omitempty"`
	// Detail is what the control named besides: a verdict (valid or
	// invalid), a quarantined tag or digest.
	Detail     string `json:"detail,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Decision   string `json:"decision"`
	Why        string `json:"why,omitempty"`
	RemoteAddr string `json:"remoteAddr,omitempty"`
	UserAgent  string `json:"userAgent,omitempty"`
	EventID    string `json:"eventId,omitempty"`
}

func init() { payloadTypes[TypeAuditRecorded] = func() any { return new(AuditRecorded) } }
