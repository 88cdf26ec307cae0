package intake

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flotilla-cd/flotilla/events"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// SenderTekton is the sender type of Tekton Pipelines' own CloudEvents.
const SenderTekton = "tekton"

// TektonSender reads the CloudEvents Tekton Pipelines sends to the sink of
// its config-events ConfigMap: each PipelineRun event
// (dev.tekton.event.pipelinerun.<phase>.v1) becomes a [TypePipelineRun].
// TaskRun and CustomRun events are ignored. The receiver's ?cluster= query
// names the cluster the runs are in.
//
// Authentication: Tekton cannot sign nor send a header, so the receiver's
// secret is the last path segment of the sink URL (/hooks/<receiver>/<token>).
//
// The body is {"pipelineRun": <object>}, the run converted to v1beta1 by
// Tekton (results in status.pipelineResults; v1's status.results is read
// too). It is decoded leniently into the few fields flotilla reads rather
// than into Tekton's API types, which would pull most of Kubernetes and
// knative into this package and fail a whole event on any field of the run
// they could not read.
type TektonSender struct {
	// Secret is the receiver's secret: the path token.
	Secret string
}

func newTektonSender(rc ReceiverConfig) (Sender, error) {
	return TektonSender{Secret: rc.Secret}, nil
}

// Tekton names used by the adapter.
const (
	tektonEventPrefix   = "dev.tekton.event."
	tektonLabelPipeline = "tekton.dev/pipeline"
	tektonLabelRollout  = "flotilla.dev/rollout"
)

// tektonPhases maps the predicate of a PipelineRun event type to its phase.
var tektonPhases = map[string]events.PipelineRunPhase{
	"queued":     events.PipelineRunQueued,
	"started":    events.PipelineRunStarted,
	"running":    events.PipelineRunRunning,
	"successful": events.PipelineRunSucceeded,
	"failed":     events.PipelineRunFailed,
	"unknown":    events.PipelineRunUnknown,
}

// tektonEventData is the data of a Tekton CloudEvent; only PipelineRuns are
// read.
type tektonEventData struct {
	PipelineRun *tektonPipelineRun `json:"pipelineRun"`
}

type tektonPipelineRun struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		PipelineRef *struct {
			Name string `json:"name"`
		} `json:"pipelineRef"`
	} `json:"spec"`
	Status struct {
		Conditions []struct {
			Type    string `json:"type"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		// PipelineResults is v1beta1's name, Results v1's.
		PipelineResults []tektonResult `json:"pipelineResults"`
		Results         []tektonResult `json:"results"`
	} `json:"status"`
}

// tektonResult is a result whose value is a string, an array or an object.
type tektonResult struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

func (TektonSender) usesPathToken() bool { return true }

// Authenticate implements [Sender].
func (s TektonSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkPathToken(d, s.Secret)
}

// Parse implements [Sender].
func (TektonSender) Parse(d *Delivery) (Result, error) {
	ces, err := cloudEventsOf(d)
	if err != nil {
		return Result{}, err
	}
	res := Result{DeliveryID: ces[0].ID()}
	var ignored []string
	for _, ce := range ces {
		e, skip, err := tektonEvent(d, ce)
		if err != nil {
			return Result{}, err
		}
		if skip != "" {
			ignored = append(ignored, skip)
			continue
		}
		res.Events = append(res.Events, e)
	}
	if len(res.Events) == 0 {
		res.Ignored = strings.Join(ignored, "; ")
	}
	return res, nil
}

// tektonEvent turns one Tekton CloudEvent into a [TypePipelineRun], or says
// why it is skipped.
func tektonEvent(d *Delivery, ce cloudevents.Event) (cloudevents.Event, string, error) {
	kind, phase, ok := tektonEventType(ce.Type())
	switch {
	case !ok:
		return cloudevents.Event{}, fmt.Sprintf("type %s is not a Tekton run event", ce.Type()), nil
	case kind != "pipelinerun":
		return cloudevents.Event{}, kind + " event", nil
	}
	var data tektonEventData
	if err := json.Unmarshal(ce.Data(), &data); err != nil {
		return cloudevents.Event{}, "", malformed("decoding Tekton %s event %s: %w", kind, ce.ID(), err)
	}
	pr := data.PipelineRun
	if pr == nil {
		return cloudevents.Event{}, "", malformed("Tekton %s event %s carries no pipelineRun", kind, ce.ID())
	}
	p := events.PipelineRun{
		Cluster:    d.Query.Get("cluster"),
		Namespace:  cmp.Or(pr.Metadata.Namespace, tektonSourceNamespace(ce.Source())),
		Name:       cmp.Or(pr.Metadata.Name, ce.Subject()),
		Pipeline:   pr.Metadata.Labels[tektonLabelPipeline],
		Phase:      phase,
		RolloutID:  pr.Metadata.Labels[tektonLabelRollout],
		Receiver:   d.Receiver,
		DeliveryID: ce.ID(),
	}
	if pr.Spec.PipelineRef != nil && pr.Spec.PipelineRef.Name != "" {
		p.Pipeline = pr.Spec.PipelineRef.Name
	}
	if p.Namespace == "" || p.Name == "" {
		return cloudevents.Event{}, "", malformed("Tekton %s event %s names no PipelineRun namespace or name", kind, ce.ID())
	}
	for _, c := range pr.Status.Conditions {
		if c.Type == "Succeeded" {
			p.Reason, p.Message = c.Reason, c.Message
		}
	}
	p.Results = tektonResults(append(pr.Status.PipelineResults, pr.Status.Results...))

	e, err := events.New(d.Receiver+"/"+SenderTekton+"/"+ce.ID(), hookSource(d.Receiver), events.TypePipelineRun, p)
	if err != nil {
		return cloudevents.Event{}, "", err
	}
	subject := p.Namespace + "/" + p.Name
	if p.Cluster != "" {
		subject = p.Cluster + "/" + subject
	}
	e.SetSubject(subject)
	e.SetTime(eventTime(ce.Time(), d))
	if p.RolloutID != "" {
		e.SetExtension(events.ExtRolloutID, p.RolloutID)
	}
	return e, "", nil
}

// tektonEventType splits "dev.tekton.event.<kind>.<predicate>.v1". ok is
// false for any other type; phase is only set for PipelineRun events.
func tektonEventType(typ string) (kind string, phase events.PipelineRunPhase, ok bool) {
	rest, found := strings.CutPrefix(typ, tektonEventPrefix)
	parts := strings.Split(rest, ".")
	if !found || len(parts) != 3 || parts[2] != "v1" {
		return "", "", false
	}
	kind = parts[0]
	if kind != "pipelinerun" {
		return kind, "", kind != ""
	}
	phase, ok = tektonPhases[parts[1]]
	return kind, phase, ok
}

// tektonSourceNamespace reads the namespace out of the source Tekton sets,
// "/apis/<group>/<version>/namespaces/<namespace>/<kind>/<name>".
func tektonSourceNamespace(source string) string {
	_, rest, found := strings.Cut(source, "/namespaces/")
	if !found {
		return ""
	}
	ns, _, _ := strings.Cut(rest, "/")
	return ns
}

// tektonResults flattens results to strings: a string as is, an array or an
// object as compact JSON. The first result of a name wins.
func tektonResults(rs []tektonResult) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		if _, dup := out[r.Name]; dup || r.Name == "" {
			continue
		}
		var s string
		if err := json.Unmarshal(r.Value, &s); err == nil {
			out[r.Name] = s
			continue
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, r.Value); err == nil {
			out[r.Name] = buf.String()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
