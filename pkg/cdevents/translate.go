package cdevents

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/package-url/packageurl-go"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts reads a rollout by id, archived ones included (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
}

// Translator turns flotilla's events into CDEvents.
type Translator struct {
	// Source is every CDEvent's source, such as "/flotilla/<instance>".
	Source   string
	Rollouts Rollouts
}

// event is what every CDEvent of the SDK offers for the common context.
type event interface {
	cdapi.CDEventReader
	SetId(string)
	SetSource(string)
	SetSubjectId(string)
	SetChainId(string)
	SetTimestamp(time.Time)
}

// Translate returns the CDEvents of e (none for the events that have no
// CDEvents counterpart, or whose rollout is gone from the state).
func (t Translator) Translate(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	var (
		out event
		err error
	)
	switch e.Type() {
	case events.TypeImageVerified:
		out, err = t.artifactPublished(e)
	case events.TypeClusterSucceeded, events.TypeClusterReverted:
		out, err = t.service(ctx, e)
	case events.TypePipelineRunRequested:
		out, err = t.pipelineQueued(e)
	case events.TypePipelineRunStarted:
		out, err = t.pipelineStarted(e)
	case events.TypePipelineRunFinished:
		out, err = t.pipelineFinished(e)
	case events.TypeAuditRecorded:
		out, err = t.auditRecorded(e)
	default:
		return nil, nil
	}
	if err != nil {
		// Only reading the state may succeed later; the rest is the
		// event's own (its payload, its image's name).
		if !errors.Is(err, errState) {
			err = fault.Permanent(err)
		}
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	// The same flotilla event always gives the same CDEvent id: a mirror
	// that resends after a crash sends duplicates a consumer can drop.
	// A cluster's service event is named by what it says (the rollout, the
	// cluster, the change), not by the flotilla event: Flagger may report
	// one outcome twice (its post-rollout hook and its event webhook), and
	// a consumer must see one change.
	out.SetId(e.ID() + "/cdevent")
	if p, err := events.Decode[events.ClusterResult](e); err == nil && strings.HasPrefix(out.GetType().Subject, "service") {
		out.SetId(p.RolloutID + "/" + p.Cluster + "/" + out.GetType().Subject + "." + out.GetType().Predicate)
	}
	out.SetSource(t.Source)
	out.SetTimestamp(e.Time())
	ce, err := cdapi.AsCloudEvent(out)
	if err != nil {
		return nil, fmt.Errorf("%s of event %s: %w", out.GetType(), e.ID(), err)
	}
	ce.SetTime(e.Time())
	return []cloudevents.Event{*ce}, nil
}

func (t Translator) artifactPublished(e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.ImageVerified](e)
	if err != nil {
		return nil, err
	}
	purl, err := PURL(p.Image, p.Digest)
	if err != nil {
		return nil, err
	}
	a, err := cdv05.NewArtifactPublishedEvent()
	if err != nil {
		return nil, err
	}
	a.SetSubjectId(purl)
	return a, nil
}

// rolloutOf reads the rollout an event names; ok is false when it is no
// longer in the state (pruned after the retention).
func (t Translator) rolloutOf(ctx context.Context, id string) (rollout.Rollout, bool, error) {
	ro, err := t.Rollouts.Get(ctx, id)
	switch {
	case errors.Is(err, rollout.ErrNotFound):
		return ro, false, nil
	case err != nil:
		return ro, false, fmt.Errorf("%w: rollout %s: %w", errState, id, err)
	}
	return ro, true, nil
}

// errState marks a failure to read the state: retried, unlike the rest.
var errState = errors.New("reading the state")

func (t Translator) service(ctx context.Context, e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.ClusterResult](e)
	if err != nil {
		return nil, err
	}
	ro, ok, err := t.rolloutOf(ctx, p.RolloutID)
	if err != nil || !ok {
		return nil, err
	}
	env := &cdapi.Reference{Id: p.Cluster}
	if e.Type() == events.TypeClusterReverted {
		// Back to what the cluster ran before, when it ran anything.
		r, err := cdv05.NewServiceRolledbackEvent()
		if err != nil {
			return nil, err
		}
		r.SetSubjectId(ro.Application)
		r.SetChainId(ro.ID)
		r.SetSubjectEnvironment(env)
		if prev := previousImage(ro, p.Cluster); prev != "" {
			if purl, err := purlOfRef(prev); err == nil {
				r.SetSubjectArtifactId(purl)
			}
		}
		if r.Subject.Content.ArtifactId == "" {
			return nil, nil // nothing ran there before: the schema needs an artifact
		}
		return r, nil
	}
	purl, err := PURL(ro.Image, ro.Digest)
	if err != nil {
		return nil, err
	}
	if previousImage(ro, p.Cluster) == "" {
		d, err := cdv05.NewServiceDeployedEvent()
		if err != nil {
			return nil, err
		}
		d.SetSubjectId(ro.Application)
		d.SetChainId(ro.ID)
		d.SetSubjectEnvironment(env)
		d.SetSubjectArtifactId(purl)
		return d, nil
	}
	u, err := cdv05.NewServiceUpgradedEvent()
	if err != nil {
		return nil, err
	}
	u.SetSubjectId(ro.Application)
	u.SetChainId(ro.ID)
	u.SetSubjectEnvironment(env)
	u.SetSubjectArtifactId(purl)
	return u, nil
}

func previousImage(ro rollout.Rollout, cluster string) string {
	for _, w := range ro.Waves {
		for _, c := range w.Clusters {
			if c.Name == cluster {
				return c.PreviousImage
			}
		}
	}
	return ""
}

// runID names a pipeline run: the rollout, the cluster and the step.
func runID(rolloutID, cluster string, step int) string {
	return rolloutID + "/" + cluster + "/" + strconv.Itoa(step)
}

// pipelineEvent is what the SDK's pipelinerun events offer.
type pipelineEvent interface {
	event
	SetSubjectPipelineName(string)
}

// pipelineRun names run step of rollout in cluster, for purpose, on ev.
func pipelineRun[E pipelineEvent](ev E, rolloutID, cluster, purpose string, step int) E {
	ev.SetSubjectId(runID(rolloutID, cluster, step))
	ev.SetChainId(rolloutID)
	ev.SetSubjectPipelineName("flotilla-" + purpose)
	return ev
}

func (t Translator) pipelineQueued(e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.PipelineRunRequested](e)
	if err != nil {
		return nil, err
	}
	q, err := cdv05.NewPipelineRunQueuedEvent()
	if err != nil {
		return nil, err
	}
	return pipelineRun(q, p.RolloutID, p.Cluster, p.Purpose, p.Step), nil
}

func (t Translator) pipelineStarted(e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.PipelineRunStart](e)
	if err != nil {
		return nil, err
	}
	s, err := cdv05.NewPipelineRunStartedEvent()
	if err != nil {
		return nil, err
	}
	return pipelineRun(s, p.RolloutID, p.Cluster, p.Purpose, p.Step), nil
}

func (t Translator) pipelineFinished(e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.PipelineRunFinished](e)
	if err != nil {
		return nil, err
	}
	f, err := cdv05.NewPipelineRunFinishedEvent()
	if err != nil {
		return nil, err
	}
	f = pipelineRun(f, p.RolloutID, p.Cluster, p.Purpose, p.Step)
	f.SetSubjectOutcome("success")
	if p.Error != "" {
		f.SetSubjectOutcome("failure")
		f.SetSubjectErrors(p.Error)
	}
	return f, nil
}

// PURL is the package URL of an image digest, as CDEvents identify
// artifacts: pkg:oci/<name>@<digest>?repository_url=<registry>/<repository>.
func PURL(image, digest string) (string, error) {
	repo, err := name.NewRepository(image)
	if err != nil {
		return "", fmt.Errorf("image %q: %w", image, err)
	}
	path := repo.RepositoryStr()
	last := path[strings.LastIndexByte(path, '/')+1:]
	q := packageurl.QualifiersFromMap(map[string]string{"repository_url": repo.RegistryStr() + "/" + path})
	return packageurl.NewPackageURL("oci", "", last, digest, q, "").ToString(), nil
}

// purlOfRef is PURL of a pinned reference "registry/repository@digest".
func purlOfRef(ref string) (string, error) {
	d, err := name.NewDigest(ref)
	if err != nil {
		return "", err
	}
	return PURL(d.Context().String(), d.DigestStr())
}

// AuditRecordedType is the CDEvents type of an audit record: a custom
// event (spec v0.5's "dev.cdeventsx.<tool>-<subject>.<predicate>.<version>"),
// since CDEvents has none for a person's approval, override, stop of the
// line, quarantine or token.
var AuditRecordedType = cdapi.CDEventType{Custom: "flotilla", Subject: "audit", Predicate: "recorded", Version: "0.1.0"}

// customEvent is the SDK's custom event, named by the type it was given.
// sdk-go v0.5.1's CustomTypeEventV0_5_1.GetType returns the package
// variable CustomTypeEventTypeV0_5_1, an empty CDEventType, not the
// context's type SetEventType set: AsCloudEvent would name every custom
// event "dev.cdevents.<undefined-subject>.<undefined-predicate>.<undefined-version>"
// (the JSON's context.type is right). The SDK's GetSchema, which calls
// that GetType, still finds the custom schema (an empty subject selects
// it), so the event validates against the spec's custom schema as is.
type customEvent struct {
	*cdv05.CustomTypeEvent
}

// GetType is the type the event was given.
func (c customEvent) GetType() cdapi.CDEventType { return c.Context.Type }

// auditRecorded is an audit record (a control allowed or refused, a token
// created or revoked) as a custom CDEvent: its subject is the record (id
// the flotilla event's), its content the record as the audit API shows
// it (who, with which groups and token, from where, what, on which
// application, rollout and wave, the decision, why and the reason).
func (t Translator) auditRecorded(e cloudevents.Event) (event, error) {
	p, err := events.Decode[events.AuditRecorded](e)
	if err != nil {
		return nil, err
	}
	c, err := cdv05.NewCustomTypeEvent()
	if err != nil {
		return nil, err
	}
	c.SetEventType(AuditRecordedType)
	c.SetSubjectId(e.ID())
	c.SetSubjectContent(p)
	if p.RolloutID != "" {
		c.SetChainId(p.RolloutID)
	}
	return customEvent{c}, nil
}
