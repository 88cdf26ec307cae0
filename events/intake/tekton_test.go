package intake

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// tektonT0 is when the runs of the Tekton fixtures were created. The bodies
// were produced by Tekton v1.9.0's own cloudevent.EventForObjectWithCondition
// from v1 PipelineRuns, as the controller sends them.
var tektonT0 = time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)

// tektonCE is the context of one CloudEvent Tekton sent.
type tektonCE struct {
	id, typ, run string
	at           time.Duration
}

// tektonDelivery is ce in binary mode, as Tekton's CloudEvents client posts
// it to the sink, with body as data.
func tektonDelivery(ce tektonCE, body []byte, query string) *Delivery {
	q, _ := url.ParseQuery(query)
	return &Delivery{
		Receiver: "tekton-eu-1",
		Header: header(
			"Content-Type", "application/json",
			"Ce-Id", ce.id,
			"Ce-Source", "/apis///namespaces/ci//"+ce.run,
			"Ce-Specversion", "1.0",
			"Ce-Subject", ce.run,
			"Ce-Time", tektonT0.Add(ce.at).Format(time.RFC3339Nano),
			"Ce-Type", ce.typ,
			"User-Agent", "Go-http-client/1.1",
		),
		Body:       body,
		Query:      q,
		PathToken:  "s3cr3t-path-token",
		ReceivedAt: received,
	}
}

const tektonIDPrefix = "6b1c3f0e-2a4d-4e5f-8a9b-0c1d2e3f4a5"

func TestTektonParse(t *testing.T) {
	const run, rollout = "release-api-x7k2p", "ro-20260102-api-1.4.2"
	running := events.PipelineRun{
		Cluster: "eu-1", Namespace: "ci", Name: run, Pipeline: "release-api", Phase: events.PipelineRunRunning,
		Reason: "Running", Message: "Tasks Completed: 0 (Failed: 0, Cancelled 0), Skipped: 0",
		RolloutID: rollout, Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "2",
	}
	tests := []struct {
		name        string
		ce          tektonCE
		file        string
		body        []byte // instead of file
		query       string
		want        []events.PipelineRun
		wantIgnored string
		wantErr     error
	}{
		{
			name:  "started",
			ce:    tektonCE{tektonIDPrefix + "1", "dev.tekton.event.pipelinerun.started.v1", run, 2 * time.Second},
			file:  "pipelinerun_started.json",
			query: "cluster=eu-1",
			want: []events.PipelineRun{{
				Cluster: "eu-1", Namespace: "ci", Name: run, Pipeline: "release-api", Phase: events.PipelineRunStarted,
				Reason: "Started", RolloutID: rollout, Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "1",
			}},
		},
		{
			name:  "running",
			ce:    tektonCE{tektonIDPrefix + "2", "dev.tekton.event.pipelinerun.running.v1", run, 4 * time.Second},
			file:  "pipelinerun_running.json",
			query: "cluster=eu-1",
			want:  []events.PipelineRun{running},
		},
		{
			name:  "successful, pipeline from the git resolver named by its label, results of every kind",
			ce:    tektonCE{tektonIDPrefix + "3", "dev.tekton.event.pipelinerun.successful.v1", run, 95 * time.Second},
			file:  "pipelinerun_successful.json",
			query: "cluster=eu-1",
			want: []events.PipelineRun{{
				Cluster: "eu-1", Namespace: "ci", Name: run, Pipeline: "release-api", Phase: events.PipelineRunSucceeded,
				Reason: "Succeeded", Message: "Tasks Completed: 3 (Failed: 0, Cancelled 0), Skipped: 0",
				Results: map[string]string{
					"image-digest":     "sha256:fea8895f450959fa676bcc1df0611ea93823a735a01205fd8622846041d0c7cf",
					"applied-clusters": `["eu-1","eu-2"]`,
					"report":           `{"passed":"12","url":"https://ci.example.com/r/42"}`,
				},
				RolloutID: rollout, Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "3",
			}},
		},
		{
			name:  "failed",
			ce:    tektonCE{tektonIDPrefix + "4", "dev.tekton.event.pipelinerun.failed.v1", "release-api-q9m4t", 61 * time.Second},
			file:  "pipelinerun_failed.json",
			query: "cluster=eu-1",
			want: []events.PipelineRun{{
				Cluster: "eu-1", Namespace: "ci", Name: "release-api-q9m4t", Pipeline: "release-api", Phase: events.PipelineRunFailed,
				Reason: "Failed", Message: "Tasks Completed: 2 (Failed: 1, Cancelled 0), Skipped: 1",
				RolloutID: "ro-20260102-api-1.4.3", Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "4",
			}},
		},
		{
			name: "unknown (pending), no cluster query, no rollout label",
			ce:   tektonCE{tektonIDPrefix + "5", "dev.tekton.event.pipelinerun.unknown.v1", "release-api-z3v8w", time.Second},
			file: "pipelinerun_unknown.json",
			want: []events.PipelineRun{{
				Namespace: "ci", Name: "release-api-z3v8w", Pipeline: "release-api", Phase: events.PipelineRunUnknown,
				Reason: "PipelineRunPending", Message: `PipelineRun "release-api-z3v8w" is pending`,
				Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "5",
			}},
		},
		{
			name:  "cancelled embedded pipeline",
			ce:    tektonCE{tektonIDPrefix + "6", "dev.tekton.event.pipelinerun.failed.v1", "hotfix-build-5kq2d", 30 * time.Second},
			file:  "pipelinerun_cancelled.json",
			query: "cluster=eu-1",
			want: []events.PipelineRun{{
				Cluster: "eu-1", Namespace: "ci", Name: "hotfix-build-5kq2d", Pipeline: "hotfix-build-5kq2d", Phase: events.PipelineRunFailed,
				Reason: "Cancelled", Message: `PipelineRun "hotfix-build-5kq2d" was cancelled`,
				Receiver: "tekton-eu-1", DeliveryID: tektonIDPrefix + "6",
			}},
		},
		{
			name: "queued, v1 results, name and namespace from the context",
			ce:   tektonCE{"q-1", "dev.tekton.event.pipelinerun.queued.v1", "release-api-aaaaa", 0},
			body: []byte(`{"pipelineRun":{"spec":{"pipelineRef":{"name":"release-api"}},
				"status":{"results":[{"name":"digest","value":"sha256:ab"},{"name":"n","value":3}]}}}`),
			want: []events.PipelineRun{{
				Namespace: "ci", Name: "release-api-aaaaa", Pipeline: "release-api", Phase: events.PipelineRunQueued,
				Results: map[string]string{"digest": "sha256:ab", "n": "3"}, Receiver: "tekton-eu-1", DeliveryID: "q-1",
			}},
		},
		{
			name:        "taskrun",
			ce:          tektonCE{tektonIDPrefix + "7", "dev.tekton.event.taskrun.successful.v1", "release-api-x7k2p-verify", 20 * time.Second},
			file:        "taskrun_successful.json",
			wantIgnored: "taskrun event",
		},
		{
			name:        "customrun",
			ce:          tektonCE{"c-1", "dev.tekton.event.customrun.started.v1", "approve-x", 0},
			body:        []byte(`{"customRun":{"metadata":{"name":"approve-x","namespace":"ci"}}}`),
			wantIgnored: "customrun event",
		},
		{
			name:        "not a Tekton type",
			ce:          tektonCE{"x-1", "com.example.other", "r", 0},
			body:        []byte(`{}`),
			wantIgnored: "type com.example.other is not a Tekton run event",
		},
		{
			name:    "pipelinerun type with a taskRun body",
			ce:      tektonCE{"x-2", "dev.tekton.event.pipelinerun.started.v1", "r", 0},
			file:    "taskrun_successful.json",
			wantErr: errAny,
		},
		{
			name:    "not JSON",
			ce:      tektonCE{"x-3", "dev.tekton.event.pipelinerun.started.v1", "r", 0},
			body:    []byte(`{"pipelineRun":`),
			wantErr: errAny,
		},
		{
			name:    "labels of the wrong type",
			ce:      tektonCE{"x-4", "dev.tekton.event.pipelinerun.started.v1", "r", 0},
			body:    []byte(`{"pipelineRun":{"metadata":{"labels":[1]}}}`),
			wantErr: errAny,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.file != "" {
				body = fixture(t, "tekton", tt.file)
			}
			res, err := TektonSender{}.Parse(tektonDelivery(tt.ce, body, tt.query))
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, payloads[events.PipelineRun](t, res.Events)); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			for i, e := range res.Events {
				p := tt.want[i]
				subject := p.Namespace + "/" + p.Name
				if p.Cluster != "" {
					subject = p.Cluster + "/" + subject
				}
				if e.ID() != "tekton-eu-1/tekton/"+tt.ce.id || e.Type() != events.TypePipelineRun || e.Source() != "/hooks/tekton-eu-1" ||
					e.Subject() != subject || !e.Time().Equal(tektonT0.Add(tt.ce.at)) || events.RolloutID(e) != p.RolloutID {
					t.Errorf("event id %q type %q source %q subject %q time %v rollout %q",
						e.ID(), e.Type(), e.Source(), e.Subject(), e.Time(), events.RolloutID(e))
				}
			}
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			if res.DeliveryID != tt.ce.id {
				t.Errorf("DeliveryID = %q, want %q", res.DeliveryID, tt.ce.id)
			}
		})
	}
}

func TestTektonParseModes(t *testing.T) {
	data := fixture(t, "tekton", "pipelinerun_running.json")
	structured, err := json.Marshal(map[string]any{
		"specversion": "1.0", "id": "s-1", "source": "/apis///namespaces/ci//release-api-x7k2p",
		"type": "dev.tekton.event.pipelinerun.running.v1", "subject": "release-api-x7k2p",
		"datacontenttype": "application/json", "data": json.RawMessage(data),
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &Delivery{Receiver: "tekton-eu-1", Header: header("Content-Type", "application/cloudevents+json"), Body: structured, ReceivedAt: received}
	res, err := TektonSender{}.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	got := payloads[events.PipelineRun](t, res.Events)
	if len(got) != 1 || got[0].Phase != events.PipelineRunRunning || got[0].Name != "release-api-x7k2p" || !res.Events[0].Time().Equal(received) {
		t.Errorf("structured mode: %+v, time %v", got, res.Events)
	}

	for _, tt := range []struct {
		name string
		h    map[string]string
	}{
		{"no CloudEvent headers", map[string]string{"Content-Type": "application/json"}},
		{"no ce-id", map[string]string{"Content-Type": "application/json", "Ce-Specversion": "1.0", "Ce-Source": "/s", "Ce-Type": "dev.tekton.event.pipelinerun.running.v1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &Delivery{Receiver: "tekton-eu-1", Header: header(), Body: data, ReceivedAt: received}
			for k, v := range tt.h {
				d.Header.Set(k, v)
			}
			_, err := TektonSender{}.Parse(d)
			if err == nil || !fault.IsPermanent(err) {
				t.Errorf("Parse = %v, want a permanent error", err)
			}
		})
	}
}

func TestTektonReplay(t *testing.T) {
	ce := tektonCE{tektonIDPrefix + "3", "dev.tekton.event.pipelinerun.successful.v1", "release-api-x7k2p", 95 * time.Second}
	body := fixture(t, "tekton", "pipelinerun_successful.json")
	first, err := TektonSender{}.Parse(tektonDelivery(ce, body, "cluster=eu-1"))
	if err != nil {
		t.Fatal(err)
	}
	// Tekton retries the same event; the intake receives it later.
	again := tektonDelivery(ce, body, "cluster=eu-1")
	again.ReceivedAt = received.Add(time.Minute)
	second, err := TektonSender{}.Parse(again)
	if err != nil {
		t.Fatal(err)
	}
	if first.Events[0].ID() != second.Events[0].ID() || string(first.Events[0].Data()) != string(second.Events[0].Data()) {
		t.Errorf("a redelivery differs: %v vs %v", first.Events[0], second.Events[0])
	}
}

func TestTektonAuthenticate(t *testing.T) {
	ce := tektonCE{tektonIDPrefix + "1", "dev.tekton.event.pipelinerun.started.v1", "release-api-x7k2p", 0}
	body := fixture(t, "tekton", "pipelinerun_started.json")
	tests := []struct {
		name   string
		secret string
		token  string
		wantOK bool
	}{
		{"right token", "s3cr3t-path-token", "s3cr3t-path-token", true},
		{"wrong token", "s3cr3t-path-token", "guess", false},
		{"token prefix", "s3cr3t-path-token", "s3cr3t", false},
		{"no token in the path", "s3cr3t-path-token", "", false},
		{"empty secret never matches", "", "", false},
		{"empty secret, some token", "", "s3cr3t-path-token", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tektonDelivery(ce, body, "")
			d.PathToken = tt.token
			checkAuth(t, TektonSender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
	if !usesPathToken(TektonSender{}) {
		t.Error("TektonSender does not take its token from the path")
	}
}

func FuzzTektonParse(f *testing.F) {
	seedFixtures(f, "tekton")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, typ := range []string{"dev.tekton.event.pipelinerun.successful.v1", "dev.tekton.event.taskrun.failed.v1"} {
			d := tektonDelivery(tektonCE{"f-1", typ, "r", 0}, body, "cluster=c")
			res, err := TektonSender{}.Parse(d)
			checkFuzzResult(t, res, err)
		}
		// The same bytes as a structured-mode event or a batch.
		for _, ct := range []string{"application/cloudevents+json", "application/cloudevents-batch+json"} {
			d := &Delivery{Receiver: "r", Header: header("Content-Type", ct), Body: body, ReceivedAt: received}
			res, err := TektonSender{}.Parse(d)
			checkFuzzResult(t, res, err)
		}
	})
}
