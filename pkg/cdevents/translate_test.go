package cdevents

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	cdapi "github.com/cdevents/sdk-go/pkg/api"
	cdv05 "github.com/cdevents/sdk-go/pkg/api/v05"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

type rollouts map[string]rollout.Rollout

func (r rollouts) Get(_ context.Context, id string) (rollout.Rollout, error) {
	ro, ok := r[id]
	if !ok {
		return ro, rollout.ErrNotFound
	}
	return ro, nil
}

const digest = "sha256:0123456789012345678901234567890123456789012345678901234567890123"

// summary is what a test compares of a CDEvent, read back with the SDK.
type summary struct {
	Type, ID, Source, Subject, Chain, Env, Artifact, Pipeline, Outcome string
}

func summarize(t *testing.T, ce cloudevents.Event) summary {
	t.Helper()
	ev, err := cdv05.NewFromJsonBytes(ce.Data())
	if err != nil {
		t.Fatalf("the SDK cannot read back %s: %v", ce.Data(), err)
	}
	if err := cdapi.Validate(ev); err != nil {
		t.Errorf("%s does not validate: %v", ev.GetType(), err)
	}
	var content struct {
		Environment  struct{ ID string } `json:"environment"`
		ArtifactID   string              `json:"artifactId"`
		PipelineName string              `json:"pipelineName"`
		Outcome      string              `json:"outcome"`
	}
	b, _ := json.Marshal(ev.GetSubjectContent())
	_ = json.Unmarshal(b, &content)
	return summary{
		Type: ce.Type(), ID: ev.GetId(), Source: ev.GetSource(), Subject: ev.GetSubjectId(), Chain: ev.GetChainId(),
		Env: content.Environment.ID, Artifact: content.ArtifactID, Pipeline: content.PipelineName, Outcome: content.Outcome,
	}
}

func TestTranslate(t *testing.T) {
	ro := rollout.Rollout{
		ID: "podinfo-1", Application: "podinfo", Image: "registry.example.com/demo/podinfo", Digest: digest,
		Waves: []rollout.Wave{{Clusters: []rollout.Cluster{
			{Name: "c1", PreviousImage: "registry.example.com/demo/podinfo@sha256:1111111111111111111111111111111111111111111111111111111111111111"},
			{Name: "c2"},
		}}},
	}
	tr := Translator{Source: "/flotilla/test", Rollouts: rollouts{ro.ID: ro}}
	purl := "pkg:oci/podinfo@sha256:0123456789012345678901234567890123456789012345678901234567890123?repository_url=registry.example.com%2Fdemo%2Fpodinfo"
	prev := "pkg:oci/podinfo@sha256:1111111111111111111111111111111111111111111111111111111111111111?repository_url=registry.example.com%2Fdemo%2Fpodinfo"
	tests := []struct {
		name    string
		typ     string
		payload any
		want    []summary
	}{
		{"a verified image is published", events.TypeImageVerified,
			events.ImageVerified{Image: "registry.example.com/demo/podinfo", Tag: "1.1.0", Digest: digest},
			[]summary{{Type: "dev.cdevents.artifact.published.0.3.0", ID: "e/cdevent", Source: "/flotilla/test", Subject: purl}}},
		{"a cluster that ran the application is upgraded", events.TypeClusterSucceeded,
			events.ClusterResult{RolloutID: "podinfo-1", Cluster: "c1"},
			[]summary{{Type: "dev.cdevents.service.upgraded.0.3.0", ID: "podinfo-1/c1/service.upgraded", Source: "/flotilla/test", Subject: "podinfo", Chain: "podinfo-1", Env: "c1", Artifact: purl}}},
		{"a cluster that did not is deployed", events.TypeClusterSucceeded,
			events.ClusterResult{RolloutID: "podinfo-1", Cluster: "c2"},
			[]summary{{Type: "dev.cdevents.service.deployed.0.3.0", ID: "podinfo-1/c2/service.deployed", Source: "/flotilla/test", Subject: "podinfo", Chain: "podinfo-1", Env: "c2", Artifact: purl}}},
		{"a reverted cluster is rolled back to what it ran", events.TypeClusterReverted,
			events.ClusterResult{RolloutID: "podinfo-1", Cluster: "c1"},
			[]summary{{Type: "dev.cdevents.service.rolledback.0.3.0", ID: "podinfo-1/c1/service.rolledback", Source: "/flotilla/test", Subject: "podinfo", Chain: "podinfo-1", Env: "c1", Artifact: prev}}},
		{"a reverted cluster that ran nothing before has no artifact to name", events.TypeClusterReverted,
			events.ClusterResult{RolloutID: "podinfo-1", Cluster: "c2"}, nil},
		{"the rollout is gone from the state", events.TypeClusterSucceeded,
			events.ClusterResult{RolloutID: "pruned", Cluster: "c1"}, nil},
		{"a run asked for is queued", events.TypePipelineRunRequested,
			events.PipelineRunRequested{RolloutID: "podinfo-1", Cluster: "c1", Purpose: "apply", Step: 2},
			[]summary{{Type: "dev.cdevents.pipelinerun.queued.0.3.0", ID: "e/cdevent", Source: "/flotilla/test", Subject: "podinfo-1/c1/2", Chain: "podinfo-1", Pipeline: "flotilla-apply"}}},
		{"a run taken up is started", events.TypePipelineRunStarted,
			events.PipelineRunStart{RolloutID: "podinfo-1", Cluster: "c1", Purpose: "apply", Step: 2},
			[]summary{{Type: "dev.cdevents.pipelinerun.started.0.3.0", ID: "e/cdevent", Source: "/flotilla/test", Subject: "podinfo-1/c1/2", Chain: "podinfo-1", Pipeline: "flotilla-apply"}}},
		{"a failed run finished with its outcome", events.TypePipelineRunFinished,
			events.PipelineRunFinished{RolloutID: "podinfo-1", Cluster: "c1", Purpose: "revert", Step: 3, Error: "boom"},
			[]summary{{Type: "dev.cdevents.pipelinerun.finished.0.3.0", ID: "e/cdevent", Source: "/flotilla/test", Subject: "podinfo-1/c1/3", Chain: "podinfo-1", Pipeline: "flotilla-revert", Outcome: "failure"}}},
		{"an audit record is a custom event", events.TypeAuditRecorded,
			events.AuditRecorded{Principal: events.AuditPrincipal{Name: "alice@example.com"}, Action: "approve", RolloutID: "podinfo-1", WaveNumber: 2, Decision: events.AuditAllowed},
			[]summary{{Type: "dev.cdeventsx.flotilla-audit.recorded.0.1.0", ID: "e/cdevent", Source: "/flotilla/test", Subject: "e", Chain: "podinfo-1"}}},
		{"other events have no counterpart", events.TypeWaveStarted, events.WaveStarted{RolloutID: "podinfo-1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := events.New("e", "/test", tt.typ, tt.payload)
			if err != nil {
				t.Fatal(err)
			}
			e.SetTime(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
			out, err := tr.Translate(t.Context(), e)
			if err != nil {
				t.Fatal(err)
			}
			var got []summary
			for _, ce := range out {
				if !ce.Time().Equal(e.Time()) {
					t.Errorf("time %s, want the event's %s", ce.Time(), e.Time())
				}
				got = append(got, summarize(t, ce))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// An audit record's custom CDEvent carries the record as its subject's
// content, read back with the SDK; and the SDK's own AsCloudEvent names a
// custom event wrongly (its GetType is an empty package variable), which
// is why Translate wraps it (customEvent): when an SDK upgrade names it
// right, the wrapper can go.
func TestAuditRecordedCustomEvent(t *testing.T) {
	rec := events.AuditRecorded{
		Principal: events.AuditPrincipal{Subject: "alice", Name: "alice@example.com", Groups: []string{"release-managers"}, Via: "token"},
		Action:    "quarantine", Application: "podinfo", Detail: "1.2.3", Reason: "CVE", Decision: events.AuditRefused,
		Why: "alice@example.com may not quarantine in project payments (needs quarantine)", RemoteAddr: "10.1.2.3",
	}
	e, err := events.New("q1/audit", "/test", events.TypeAuditRecorded, rec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Translator{Source: "/flotilla/test", Rollouts: rollouts{}}.Translate(t.Context(), e)
	if err != nil || len(out) != 1 {
		t.Fatalf("Translate = %v, %v; want one CDEvent", out, err)
	}
	ev, err := cdv05.NewFromJsonBytes(out[0].Data())
	if err != nil {
		t.Fatal(err)
	}
	custom, ok := ev.(*cdv05.CustomTypeEvent)
	if !ok {
		t.Fatalf("read back as %T, want a custom event", ev)
	}
	if got := custom.Context.Type.String(); got != "dev.cdeventsx.flotilla-audit.recorded.0.1.0" || out[0].Type() != got {
		t.Errorf("context.type %s, CloudEvent type %s", got, out[0].Type())
	}
	var got events.AuditRecorded
	raw, _ := json.Marshal(custom.GetSubjectContent())
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("the record in the subject's content (-want +got):\n%s", diff)
	}

	sdk, err := cdv05.NewCustomTypeEvent()
	if err != nil {
		t.Fatal(err)
	}
	sdk.SetEventType(AuditRecordedType)
	sdk.SetSource("/flotilla/test")
	sdk.SetSubjectId("x")
	sdk.SetSubjectContent(rec)
	ce, err := cdapi.AsCloudEvent(sdk)
	if err != nil {
		t.Fatal(err)
	}
	if ce.Type() == AuditRecordedType.String() {
		t.Log("sdk-go's AsCloudEvent now names custom events by their type: customEvent's GetType is no longer needed")
	} else if ce.Type() != "dev.cdevents.<undefined-subject>.<undefined-predicate>.<undefined-version>" {
		t.Errorf("the SDK names a custom event %q", ce.Type())
	}
}
