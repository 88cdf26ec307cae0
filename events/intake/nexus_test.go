package intake

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

const nexusDeliveryID = "5f2b7a3c-0d4e-4f61-9a8b-7c6d5e4f3a21"

func nexusDelivery(webhook string, body []byte) *Delivery {
	return &Delivery{
		Receiver: "nexus",
		Header: header(
			"Content-Type", "application/json; charset=UTF-8",
			"X-Nexus-Webhook-Id", webhook,
			"X-Nexus-Webhook-Delivery", nexusDeliveryID,
			"User-Agent", "Nexus/3.76.0-03 (OSS; Linux; 6.8.0; amd64; 17.0.13)",
		),
		Body:       body,
		ReceivedAt: received,
	}
}

// nexusSign is X-Nexus-Webhook-Signature of body.
func nexusSign(secret string, body []byte) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

func TestNexusParse(t *testing.T) {
	const component = "rm:repository:component"
	created := fixture(t, "nexus", "docker_created.json")
	noDelivery := nexusDelivery(component, created)
	noDelivery.Header.Del("X-Nexus-Webhook-Delivery")
	millis := []byte(`{"timestamp":1767366245123,"action":"CREATED","component":{"format":"docker","name":"a/b","version":"t"}}`)
	tests := []imageParseCase{
		{
			name: "docker component created",
			d:    nexusDelivery(component, created),
			want: []events.ImagePushed{{
				Registry:   "nexus.example.com:8083",
				Repository: "shop/api",
				Tag:        "1.4.2",
				Pusher:     "ci",
				Sender:     "nexus",
				Receiver:   "nexus",
				DeliveryID: nexusDeliveryID,
			}},
			wantIDs:   []string{"nexus/nexus/" + nexusDeliveryID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)},
			wantDeliv: nexusDeliveryID,
		},
		{
			name: "docker component updated, leading slash, RFC 3339 offset",
			d:    nexusDelivery(component, fixture(t, "nexus", "docker_updated.json")),
			want: []events.ImagePushed{{
				Registry:   "nexus.example.com:8083",
				Repository: "team/app",
				Tag:        "latest",
				Pusher:     "admin",
				Sender:     "nexus",
				Receiver:   "nexus",
				DeliveryID: nexusDeliveryID,
			}},
			wantIDs:   []string{"nexus/nexus/" + nexusDeliveryID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 10, 0, 5e8, time.UTC)},
			wantDeliv: nexusDeliveryID,
		},
		{
			name: "no delivery header: body key",
			d:    noDelivery,
			want: []events.ImagePushed{{
				Registry:   "nexus.example.com:8083",
				Repository: "shop/api",
				Tag:        "1.4.2",
				Pusher:     "ci",
				Sender:     "nexus",
				Receiver:   "nexus",
			}},
			wantIDs:   []string{"nexus/nexus/" + bodyKey(noDelivery)},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)},
		},
		{
			name:      "timestamp in unix milliseconds, no initiator",
			d:         nexusDelivery(component, millis),
			want:      []events.ImagePushed{{Registry: "nexus.example.com:8083", Repository: "a/b", Tag: "t", Sender: "nexus", Receiver: "nexus", DeliveryID: nexusDeliveryID}},
			wantIDs:   []string{"nexus/nexus/" + nexusDeliveryID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)},
			wantDeliv: nexusDeliveryID,
		},
		{
			name:      "unreadable timestamp: receive time",
			d:         nexusDelivery(component, []byte(`{"timestamp":"Fri Jan 02","action":"UPDATED","component":{"format":"docker","name":"a/b","version":"t"}}`)),
			want:      []events.ImagePushed{{Registry: "nexus.example.com:8083", Repository: "a/b", Tag: "t", Sender: "nexus", Receiver: "nexus", DeliveryID: nexusDeliveryID}},
			wantIDs:   []string{"nexus/nexus/" + nexusDeliveryID},
			wantTimes: []time.Time{received},
			wantDeliv: nexusDeliveryID,
		},
		{name: "docker component deleted", d: nexusDelivery(component, fixture(t, "nexus", "docker_deleted.json")), wantIgnored: "action DELETED", wantDeliv: nexusDeliveryID},
		{name: "components purged", d: nexusDelivery(component, fixture(t, "nexus", "purged.json")), wantIgnored: "action PURGED", wantDeliv: nexusDeliveryID},
		{name: "maven component", d: nexusDelivery(component, fixture(t, "nexus", "maven_created.json")), wantIgnored: "format maven2", wantDeliv: nexusDeliveryID},
		{
			name:        "component without format",
			d:           nexusDelivery(component, []byte(`{"action":"CREATED","component":{"name":"a","version":"1"}}`)),
			wantIgnored: "format unknown",
			wantDeliv:   nexusDeliveryID,
		},
		{
			name:        "docker component by digest",
			d:           nexusDelivery(component, []byte(`{"action":"CREATED","component":{"format":"docker","name":"a/b","version":"sha256:5555555555555555555555555555555555555555555555555555555555555555"}}`)),
			wantIgnored: "untagged push",
			wantDeliv:   nexusDeliveryID,
		},
		{
			name:        "docker component without version",
			d:           nexusDelivery(component, []byte(`{"action":"CREATED","component":{"format":"docker","name":"a/b"}}`)),
			wantIgnored: "untagged push",
			wantDeliv:   nexusDeliveryID,
		},
		{name: "asset webhook", d: nexusDelivery("rm:repository:asset", fixture(t, "nexus", "asset_created.json")), wantIgnored: "webhook rm:repository:asset", wantDeliv: nexusDeliveryID},
		{name: "audit webhook", d: nexusDelivery("rm:audit", fixture(t, "nexus", "audit.json")), wantIgnored: "webhook rm:audit", wantDeliv: nexusDeliveryID},
		{
			name: "webhook id in upper case",
			d:    nexusDelivery(strings.ToUpper(component), created),
			want: []events.ImagePushed{{
				Registry: "nexus.example.com:8083", Repository: "shop/api", Tag: "1.4.2", Pusher: "ci",
				Sender: "nexus", Receiver: "nexus", DeliveryID: nexusDeliveryID,
			}},
			wantIDs:   []string{"nexus/nexus/" + nexusDeliveryID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 4, 5, 123e6, time.UTC)},
			wantDeliv: nexusDeliveryID,
		},
		{name: "missing webhook id", d: nexusDelivery("", created), wantErr: errAny},
		{
			name: "wrong content type",
			d: func() *Delivery {
				d := nexusDelivery(component, created)
				d.Header.Set("Content-Type", "text/plain")
				return d
			}(),
			wantErr: ErrUnsupportedMediaType,
		},
		{name: "not JSON", d: nexusDelivery(component, []byte(`{"action":`)), wantErr: errAny},
		{name: "not an object", d: nexusDelivery(component, []byte(`"CREATED"`)), wantErr: errAny},
		{name: "no action", d: nexusDelivery(component, []byte(`{"component":{"format":"docker","name":"a","version":"1"}}`)), wantErr: errAny},
		{name: "created without component", d: nexusDelivery(component, []byte(`{"action":"CREATED"}`)), wantErr: errAny},
		{name: "docker component without name", d: nexusDelivery(component, []byte(`{"action":"CREATED","component":{"format":"docker","name":"/","version":"1"}}`)), wantErr: errAny},
		{name: "component not an object", d: nexusDelivery(component, []byte(`{"action":"CREATED","component":[]}`)), wantErr: errAny},
	}
	s := NexusSender{Registry: "nexus.example.com:8083"}
	runImageParseCases(t, "nexus", s.Parse, nil, tests)
}

func TestNexusParseReplay(t *testing.T) {
	s := NexusSender{Registry: "nexus.example.com:8083"}
	for _, keep := range []bool{true, false} {
		d := func() *Delivery {
			d := nexusDelivery("rm:repository:component", fixture(t, "nexus", "docker_created.json"))
			if !keep {
				d.Header.Del("X-Nexus-Webhook-Delivery")
			}
			return d
		}
		first, err := s.Parse(d())
		if err != nil {
			t.Fatal(err)
		}
		again := d()
		again.ReceivedAt = received.Add(time.Hour)
		second, err := s.Parse(again)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(registryEventIDs(first), registryEventIDs(second)); diff != "" || len(first.Events) != 1 {
			t.Errorf("delivery header %v: ids differ on redelivery (-first +second):\n%s", keep, diff)
		}
	}
}

func TestNexusAuthenticate(t *testing.T) {
	const secret = "nexus-hook-s3cret"
	body := fixture(t, "nexus", "docker_created.json")
	modified := []byte(strings.Replace(string(body), `"1.4.2"`, `"6.6.6"`, 1))
	tests := []struct {
		name      string
		body      []byte
		signature string // "" leaves the header out
		secret    string
		wantOK    bool
	}{
		{"right secret", body, nexusSign(secret, body), secret, true},
		{"upper-case hex", body, strings.ToUpper(nexusSign(secret, body)), secret, true},
		{"wrong secret", body, nexusSign("guess", body), secret, false},
		{"signature over a modified body", modified, nexusSign(secret, body), secret, false},
		{"sha256 signature", body, artifactorySign(secret, body), secret, false},
		{"truncated", body, nexusSign(secret, body)[:20], secret, false},
		{"not hex", body, "zz", secret, false},
		{"the secret itself", body, secret, secret, false},
		{"missing header", body, "", secret, false},
		{"empty secret never matches", body, nexusSign("", body), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := nexusDelivery("rm:repository:component", tt.body)
			if tt.signature != "" {
				d.Header.Set("X-Nexus-Webhook-Signature", tt.signature)
			}
			checkAuth(t, NexusSender{Secret: tt.secret, Registry: "nexus.example.com:8083"}, d, tt.wantOK)
		})
	}
}

func TestNewNexusSender(t *testing.T) {
	s, err := newNexusSender(ReceiverConfig{Name: "n", Type: SenderNexus, Secret: "k", Registry: "nexus.example.com:8083/"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(NexusSender{Secret: "k", Registry: "nexus.example.com:8083"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
	_, err = newNexusSender(ReceiverConfig{Name: "n", Type: SenderNexus, Secret: "k"})
	if err == nil || !strings.Contains(err.Error(), "nexus receivers need registry") {
		t.Errorf("without registry: %v", err)
	}
	if _, err := newNexusSender(ReceiverConfig{Secret: "k", Registry: "https://nexus.example.com"}); err == nil {
		t.Error("a registry URL was accepted")
	}
}

func FuzzNexusParse(f *testing.F) {
	seedFixtures(f, "nexus")
	f.Add([]byte(`{"timestamp":-1,"action":"UPDATED","component":{"format":"docker","name":"//","version":":"}}`))
	s := NexusSender{Secret: "k", Registry: "nexus.example.com:8083"}
	f.Fuzz(func(t *testing.T, body []byte) {
		d := nexusDelivery("rm:repository:component", body)
		d.Header.Set("X-Nexus-Webhook-Signature", nexusSign("k", body))
		if err := s.Authenticate(t.Context(), d); err != nil {
			t.Fatalf("Authenticate of a signed body: %v", err)
		}
		res, err := s.Parse(d)
		checkFuzzResult(t, res, err)
	})
}
