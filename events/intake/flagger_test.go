package intake

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func flaggerDelivery(body []byte, query url.Values, token string) *Delivery {
	return &Delivery{
		Receiver:   "flagger",
		Header:     header("Content-Type", "application/json"),
		Body:       body,
		Query:      query,
		PathToken:  token,
		ReceivedAt: received,
	}
}

func flaggerID(cluster string, body []byte) string {
	sum := sha256.Sum256(append([]byte(cluster+"\x00"), body...))
	return "flagger/flagger/" + hex.EncodeToString(sum[:])
}

func TestFlaggerParse(t *testing.T) {
	const rollout = "r-20260102-api-7f3c"
	canary := func(phase string, outcome events.CanaryOutcome, msg, typ, cluster, rolloutID string) events.Canary {
		return events.Canary{
			Cluster: cluster, Namespace: "shop", Name: "api", Phase: phase, Outcome: outcome,
			Message: msg, EventType: typ, Checksum: "85d557f47b", RolloutID: rolloutID, Receiver: "flagger",
		}
	}
	initialized := canary("Initialized", events.CanaryInitialized, "Initialization done! api.shop", "Normal", "eu-1", "")
	initialized.Checksum = "6b4f8d9c7d"
	tests := []struct {
		name        string
		file        string
		body        []byte
		query       url.Values
		want        []events.Canary
		wantCluster string // for the id
		wantTime    time.Time
		wantIgnored string
		wantErr     error
	}{
		{
			name:        "initialization done",
			file:        "initialized.json",
			want:        []events.Canary{initialized},
			wantCluster: "eu-1",
			wantTime:    time.UnixMilli(1767366000000).UTC(),
		},
		{
			name:        "promotion completed",
			file:        "promoted.json",
			want:        []events.Canary{canary("Succeeded", events.CanarySucceeded, "Promotion completed! Scaling down api.shop", "Normal", "eu-1", rollout)},
			wantCluster: "eu-1",
			wantTime:    time.UnixMilli(1718000000000).UTC(),
		},
		{
			name:        "rolling back while the phase still says progressing",
			file:        "rolling_back.json",
			want:        []events.Canary{canary("Progressing", events.CanaryFailed, "Rolling back api.shop failed checks threshold reached 1", "Warning", "us-2", rollout)},
			wantCluster: "us-2",
			wantTime:    time.UnixMilli(1767366900000).UTC(),
		},
		{
			name:        "new revision while the phase still says succeeded, cluster from the query",
			file:        "new_revision.json",
			query:       url.Values{"cluster": {"ap-3"}},
			want:        []events.Canary{canary("Succeeded", events.CanaryProgressing, "New revision detected! Scaling up api.shop", "Normal", "ap-3", rollout)},
			wantCluster: "ap-3",
			wantTime:    time.UnixMilli(1767366500000).UTC(),
		},
		{
			name:        "metadata cluster wins over the query",
			file:        "rolling_back.json",
			query:       url.Values{"cluster": {"ap-3"}},
			want:        []events.Canary{canary("Progressing", events.CanaryFailed, "Rolling back api.shop failed checks threshold reached 1", "Warning", "us-2", rollout)},
			wantCluster: "us-2",
			wantTime:    time.UnixMilli(1767366900000).UTC(),
		},
		{
			name:        "no timestamp: time of receipt",
			body:        []byte(`{"name":"api","namespace":"shop","phase":"Progressing","checksum":"85d557f47b","metadata":{"eventMessage":"Advance api.shop canary weight 10","cluster":"eu-1","timestamp":"soon"}}`),
			want:        []events.Canary{canary("Progressing", events.CanaryProgressing, "Advance api.shop canary weight 10", "", "eu-1", "")},
			wantCluster: "eu-1",
			wantTime:    received,
		},
		{name: "gate call without a gate type", file: "gate.json", wantErr: errAny},
		{name: "gate call of an unknown type", file: "gate.json", query: url.Values{"gate": {"event"}}, wantErr: errAny},
		{
			name:        "post-rollout after promotion",
			body:        []byte(`{"name":"api","namespace":"shop","phase":"Succeeded","checksum":"85d557f47b","metadata":{"cluster":"eu-1","gate":"post-rollout"}}`),
			want:        []events.Canary{canary("Succeeded", events.CanarySucceeded, "post-rollout hook: Succeeded", "", "eu-1", "")},
			wantCluster: "eu-1",
			wantTime:    received,
		},
		{
			name:        "post-rollout after rollback",
			body:        []byte(`{"name":"api","namespace":"shop","phase":"Failed","checksum":"85d557f47b","metadata":{"cluster":"eu-1"}}`),
			query:       url.Values{"gate": {"post-rollout"}},
			want:        []events.Canary{canary("Failed", events.CanaryFailed, "post-rollout hook: Failed", "", "eu-1", "")},
			wantCluster: "eu-1",
			wantTime:    received,
		},
		{name: "no cluster anywhere", file: "new_revision.json", wantErr: errAny},
		{name: "not JSON", body: []byte(`<html>`), wantErr: errAny},
		{name: "metadata not strings", body: []byte(`{"name":"a","namespace":"b","metadata":{"eventMessage":1}}`), wantErr: errAny},
		{name: "no name", body: []byte(`{"namespace":"shop","metadata":{"eventMessage":"x","cluster":"c"}}`), wantErr: errAny},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.file != "" {
				body = fixture(t, "flagger", tt.file)
			}
			res, err := FlaggerSender{}.Parse(flaggerDelivery(body, tt.query, ""))
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			if diff := cmp.Diff(tt.want, payloads[events.Canary](t, res.Events)); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
			for i, e := range res.Events {
				if e.ID() != flaggerID(tt.wantCluster, body) {
					t.Errorf("id %q, want %q", e.ID(), flaggerID(tt.wantCluster, body))
				}
				if e.Type() != events.TypeCanary || e.Source() != "/hooks/flagger" || !e.Time().Equal(tt.wantTime) {
					t.Errorf("type %q source %q time %v, want time %v", e.Type(), e.Source(), e.Time(), tt.wantTime)
				}
				if got := events.RolloutID(e); got != tt.want[i].RolloutID {
					t.Errorf("rollout id extension %q, want %q", got, tt.want[i].RolloutID)
				}
			}
		})
	}
}

func TestFlaggerGateCall(t *testing.T) {
	body := fixture(t, "flagger", "gate.json")
	for _, gate := range []string{GateConfirmRollout, GatePreRollout, GateRollout, GateConfirmTrafficIncrease, GateConfirmPromotion, GateRollback} {
		res, err := FlaggerSender{}.Parse(flaggerDelivery(body, url.Values{"gate": {gate}}, ""))
		if err != nil {
			t.Fatalf("%s: %v", gate, err)
		}
		want := &GateCall{
			Gate: gate, Cluster: "eu-1", Namespace: "shop", Name: "api", Phase: "Progressing", Checksum: "85d557f47b",
			RolloutID: "r-20260102-api-7f3c", Metadata: map[string]string{"cluster": "eu-1", "rollout": "r-20260102-api-7f3c"},
		}
		if diff := cmp.Diff(want, res.Gate); diff != "" {
			t.Errorf("%s: gate call (-want +got):\n%s", gate, diff)
		}
		if len(res.Events) != 0 {
			t.Errorf("%s: a gate call journals nothing, got %d events", gate, len(res.Events))
		}
	}
	// The token never reaches a gate keeper.
	withToken := []byte(`{"name":"api","namespace":"shop","phase":"Progressing","metadata":{"gate":"confirm-promotion","token":"s3cret"}}`)
	res, err := FlaggerSender{}.Parse(flaggerDelivery(withToken, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := res.Gate.Metadata["token"]; ok {
		t.Errorf("gate call metadata carries the token: %v", res.Gate.Metadata)
	}
}

func TestFlaggerRedeliveryDedupes(t *testing.T) {
	body := fixture(t, "flagger", "new_revision.json")
	parse := func(cluster string) string {
		t.Helper()
		res, err := FlaggerSender{}.Parse(flaggerDelivery(body, url.Values{"cluster": {cluster}}, ""))
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse: %v, %d events", err, len(res.Events))
		}
		return res.Events[0].ID()
	}
	if a, b := parse("eu-1"), parse("eu-1"); a != b {
		t.Errorf("same delivery, different ids %q %q", a, b)
	}
	if a, b := parse("eu-1"), parse("eu-2"); a == b {
		t.Errorf("same body from two clusters, same id %q", a)
	}
}

func TestClassifyCanary(t *testing.T) {
	tests := []struct {
		phase, message string
		want           events.CanaryOutcome
	}{
		{"Succeeded", "Promotion completed! Scaling down api.shop", events.CanarySucceeded},
		{"Finalising", "Promotion completed! Scaling down api.shop", events.CanarySucceeded},
		{"Initialized", "Initialization done! api.shop", events.CanaryInitialized},
		{"Progressing", "Rolling back api.shop failed checks threshold reached 1", events.CanaryFailed},
		{"Progressing", "Rolling back api.shop progress deadline exceeded canary deployment api.shop is not ready", events.CanaryFailed},
		{"Progressing", "Canary failed! Scaling down api.shop", events.CanaryFailed},
		// A phase left over from a failed revision is no failure of the next
		// (the confirm-rollout "passed" event of a new revision came with
		// Failed, and failed it).
		{"Failed", "Halt api.shop advancement waiting for approval", events.CanaryProgressing},
		{"Failed", "New revision detected! Scaling up api.shop", events.CanaryProgressing},
		{"Failed", "Confirm-rollout check confirm passed", events.CanaryProgressing},
		{"Failed", "post-rollout hook: Failed", events.CanaryFailed},
		{"Succeeded", "post-rollout hook: Succeeded", events.CanarySucceeded},
		{"Succeeded", "New revision detected! Scaling up api.shop", events.CanaryProgressing},
		{"Progressing", "Starting canary analysis for api.shop", events.CanaryProgressing},
		{"Progressing", "Advance api.shop canary weight 20", events.CanaryProgressing},
		{"Promoting", "Routing all traffic to primary", events.CanaryProgressing},
		{"WaitingPromotion", "Halt api.shop advancement waiting for approval", events.CanaryProgressing},
	}
	for _, tt := range tests {
		if got := ClassifyCanary(tt.phase, tt.message); got != tt.want {
			t.Errorf("ClassifyCanary(%q, %q) = %q, want %q", tt.phase, tt.message, got, tt.want)
		}
	}
}

func TestFlaggerAuthenticate(t *testing.T) {
	const secret = "flagger-token-eu-1"
	withToken := fixture(t, "flagger", "promoted.json")       // metadata.token is the secret
	withoutToken := fixture(t, "flagger", "initialized.json") // no metadata.token
	tests := []struct {
		name      string
		body      []byte
		pathToken string
		secret    string
		wantOK    bool
	}{
		{"right path token", withoutToken, secret, secret, true},
		{"wrong path token", withoutToken, "flagger-token-eu-2", secret, false},
		{"right metadata token", withToken, "", secret, true},
		{"wrong metadata token", withToken, "", "another-secret", false},
		{"a wrong path token is not rescued by the metadata", withToken, "guess", secret, false},
		{"no token at all", withoutToken, "", secret, false},
		{"unreadable body, no path token", []byte(`nope`), "", secret, false},
		{"unreadable body, right path token", []byte(`nope`), secret, secret, true},
		{"empty secret never matches", []byte(`{"metadata":{"token":""}}`), "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAuth(t, FlaggerSender{Secret: tt.secret}, flaggerDelivery(tt.body, nil, tt.pathToken), tt.wantOK)
		})
	}
}

func FuzzFlaggerParse(f *testing.F) {
	seedFixtures(f, "flagger")
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := FlaggerSender{}.Parse(flaggerDelivery(body, url.Values{"cluster": {"fuzz"}}, ""))
		checkFuzzResult(t, res, err)
	})
}
