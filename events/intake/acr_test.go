package intake

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func acrDelivery(body []byte) *Delivery {
	return &Delivery{
		Receiver:   "acr",
		Header:     header("Content-Type", "application/json", "User-Agent", "AzureContainerRegistry/1.0"),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestACRParse(t *testing.T) {
	const pushID = "cb8c3971-9adc-488b-a3e5-43cbb4974ff5"
	const noID = `{"action":"push","extra":{"x":[1]},"target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","size":5.24e2,"length":524.0,"repository":"a/b","tag":"t"},"request":{"host":"r.azurecr.io","method":"PUT"}}`
	acrPush := func(mediaType, tag string) string {
		return `{"id":"e1","timestamp":"2026-01-02T15:00:00Z","action":"push","target":{"mediaType":"` + mediaType +
			`","digest":"sha256:ab","repository":"shop/api","tag":"` + tag + `"},"request":{"host":"acme.azurecr.io"}}`
	}
	tests := []imageParseCase{
		{
			name: "push",
			file: "push.json",
			want: []events.ImagePushed{{
				Registry:   "acme.azurecr.io",
				Repository: "shop/api",
				Tag:        "1.4.2",
				Digest:     "sha256:80f0d5c8786bb9e621a45ece0db56d11cdc624ad20da9fe62e9d25490f331d7d",
				MediaType:  "application/vnd.docker.distribution.manifest.v2+json",
				Sender:     "acr",
				Receiver:   "acr",
				DeliveryID: pushID,
			}},
			wantIDs:   []string{"acr/acr/" + pushID},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 3, 58, 343145347, time.UTC)},
			wantDeliv: pushID,
		},
		{
			name: "OCI index",
			file: "push_oci_index.json",
			want: []events.ImagePushed{{
				Registry:   "acme.azurecr.io",
				Repository: "web",
				Tag:        "v2.0.0",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				MediaType:  "application/vnd.oci.image.index.v1+json",
				Sender:     "acr",
				Receiver:   "acr",
				DeliveryID: "5d2a8c1e-41f7-4b0e-9f3a-6c7d8e9f0a1b",
			}},
			wantIDs:   []string{"acr/acr/5d2a8c1e-41f7-4b0e-9f3a-6c7d8e9f0a1b"},
			wantTimes: []time.Time{time.Date(2026, 1, 3, 9, 30, 2, 100_000_000, time.UTC)},
			wantDeliv: "5d2a8c1e-41f7-4b0e-9f3a-6c7d8e9f0a1b",
		},
		{name: "untagged push", file: "push_untagged.json", wantIgnored: "untagged push", wantDeliv: "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"},
		{name: "ping", file: "ping.json", wantIgnored: "ping", wantDeliv: "0e9b5a31-8d4c-4b7e-9a2f-1c3d5e7f9a0b"},
		{name: "delete", file: "delete.json", wantIgnored: "delete", wantDeliv: "afc359ce-df7f-4e32-9c5d-1ff8aa80927b"},
		{name: "chart push", file: "chart_push.json", wantIgnored: "chart_push", wantDeliv: "6356e9e0-627f-4fed-a2c4-d9059b5143ac"},
		{name: "chart delete", file: "chart_delete.json", wantIgnored: "chart_delete", wantDeliv: "338a3ef7-ad68-4128-8e5f-7c1d2a3b4c5d"},
		{name: "quarantine", file: "quarantine.json", wantIgnored: "quarantine", wantDeliv: "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"},
		{
			name:        "push of a layer",
			body:        []byte(acrPush("application/vnd.oci.image.layer.v1.tar+gzip", "")),
			wantIgnored: "push of application/vnd.oci.image.layer.v1.tar+gzip",
			wantDeliv:   "e1",
		},
		{
			name:        "tagged push of an unknown media type",
			body:        []byte(acrPush("application/vnd.acr.helm.chart", "1.0.0")),
			wantIgnored: "push of application/vnd.acr.helm.chart",
			wantDeliv:   "e1",
		},
		{
			name:      "docker manifest list",
			body:      []byte(acrPush("application/vnd.docker.distribution.manifest.list.v2+json", "t")),
			want:      []events.ImagePushed{{Registry: "acme.azurecr.io", Repository: "shop/api", Tag: "t", Digest: "sha256:ab", MediaType: "application/vnd.docker.distribution.manifest.list.v2+json", Sender: "acr", Receiver: "acr", DeliveryID: "e1"}},
			wantIDs:   []string{"acr/acr/e1"},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)},
			wantDeliv: "e1",
		},
		{
			name:      "tagged push without media type",
			body:      []byte(acrPush("", "t")),
			want:      []events.ImagePushed{{Registry: "acme.azurecr.io", Repository: "shop/api", Tag: "t", Digest: "sha256:ab", Sender: "acr", Receiver: "acr", DeliveryID: "e1"}},
			wantIDs:   []string{"acr/acr/e1"},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)},
			wantDeliv: "e1",
		},
		{
			name:      "no id, no timestamp, sizes as floats, extra fields",
			body:      []byte(noID),
			want:      []events.ImagePushed{{Registry: "r.azurecr.io", Repository: "a/b", Tag: "t", MediaType: "application/vnd.oci.image.manifest.v1+json", Sender: "acr", Receiver: "acr"}},
			wantIDs:   []string{"acr/acr/" + bodyKey(&Delivery{Body: []byte(noID)})},
			wantTimes: []time.Time{received},
		},
		{
			name:      "unreadable timestamp: time of receipt",
			body:      []byte(`{"id":"e2","timestamp":"yesterday","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"a/b","tag":"t"},"request":{"host":"r.azurecr.io"}}`),
			want:      []events.ImagePushed{{Registry: "r.azurecr.io", Repository: "a/b", Tag: "t", MediaType: "application/vnd.oci.image.manifest.v1+json", Sender: "acr", Receiver: "acr", DeliveryID: "e2"}},
			wantIDs:   []string{"acr/acr/e2"},
			wantTimes: []time.Time{received},
			wantDeliv: "e2",
		},
		{name: "no action", body: []byte(`{"id":"e1","target":{"repository":"a","tag":"t"}}`), wantErr: errAny},
		{name: "push without host", body: []byte(`{"id":"e1","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","repository":"a","tag":"t"}}`), wantErr: errAny},
		{name: "push without repository", body: []byte(`{"id":"e1","action":"push","target":{"mediaType":"application/vnd.oci.image.manifest.v1+json","tag":"t"},"request":{"host":"r"}}`), wantErr: errAny},
		{name: "Event Grid array", body: []byte(`[{"id":"x","data":{"action":"push"}}]`), wantErr: errAny},
		{name: "not JSON", body: []byte(`action=push`), wantErr: errAny},
		{name: "truncated", body: []byte(`{"id":"e1","action":"push","target":{`), wantErr: errAny},
		{name: "wrong content type", file: "push.json", contentType: "application/xml", wantErr: ErrUnsupportedMediaType},
	}
	runImageParseCases(t, "acr", ACRSender{}.Parse, acrDelivery, tests)
}

func TestACRRedeliveryDedupes(t *testing.T) {
	body := fixture(t, "acr", "push.json")
	parse := func() string {
		t.Helper()
		res, err := ACRSender{}.Parse(acrDelivery(body))
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse: %v, %d events", err, len(res.Events))
		}
		return res.Events[0].ID()
	}
	if a, b := parse(), parse(); a != b {
		t.Errorf("same delivery, different ids %q %q", a, b)
	}
}

func TestACRAuthenticate(t *testing.T) {
	const secret = "acr-hook-s3cret"
	basic := func(cred string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(cred)) }
	tests := []struct {
		name   string
		header []string
		secret string
		wantOK bool
	}{
		{"bearer", []string{"Authorization", "Bearer " + secret}, secret, true},
		{"verbatim", []string{"Authorization", secret}, secret, true},
		{"basic credentials", []string{"Authorization", basic("hook:" + secret)}, "hook:" + secret, true},
		{"wrong secret", []string{"Authorization", "Bearer guess"}, secret, false},
		{"secret as prefix", []string{"Authorization", "Bearer " + secret + "x"}, secret, false},
		{"truncated secret", []string{"Authorization", "Bearer " + secret[:5]}, secret, false},
		{"basic of the wrong password", []string{"Authorization", basic("hook:guess")}, "hook:" + secret, false},
		{"missing header", nil, secret, false},
		{"other header", []string{"X-Acr-Token", secret}, secret, false},
		{"empty secret never matches", []string{"Authorization", "Bearer "}, "", false},
		{"empty secret, empty verbatim header", []string{"Authorization", " "}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := acrDelivery(fixture(t, "acr", "push.json"))
			for i := 0; i+1 < len(tt.header); i += 2 {
				d.Header.Set(tt.header[i], tt.header[i+1])
			}
			checkAuth(t, ACRSender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
	t.Run("configured header", func(t *testing.T) {
		d := acrDelivery(fixture(t, "acr", "push.json"))
		d.Header.Set("X-Acr-Token", secret)
		checkAuth(t, ACRSender{Secret: secret, Header: "x-acr-token"}, d, true)
		checkAuth(t, ACRSender{Secret: secret}, d, false)
		d.Header.Set("Authorization", "Bearer "+secret)
		checkAuth(t, ACRSender{Secret: "other", Header: "X-Acr-Token"}, d, false)
	})
	if usesPathToken(ACRSender{}) {
		t.Error("ACRSender takes path tokens")
	}
}

func TestNewACRSender(t *testing.T) {
	s, err := newACRSender(ReceiverConfig{Name: "acr", Type: SenderACR, Secret: "s", Header: "X-Acr-Token"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ACRSender{Secret: "s", Header: "X-Acr-Token"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
}

func FuzzACR(f *testing.F) {
	seedFixtures(f, "acr")
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := ACRSender{}.Parse(acrDelivery(body))
		checkFuzzResult(t, res, err)
	})
}
