package intake

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func harborDelivery(body []byte, contentType string) *Delivery {
	return &Delivery{
		Receiver:   "harbor",
		Header:     header("Content-Type", contentType, "User-Agent", "Go-http-client/1.1"),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestHarborParse(t *testing.T) {
	const ce = mediaCloudEvent
	push := fixture(t, "harbor", "push.json")
	pushKey := bodyKey(harborDelivery(push, "application/json"))
	multi := fixture(t, "harbor", "push_multi.json")
	multiKey := bodyKey(harborDelivery(multi, "application/json"))
	wantAPI := events.ImagePushed{
		Registry:   "harbor.example.com",
		Repository: "shop/api",
		Tag:        "1.4.2",
		Digest:     "sha256:8a9e3f1c6b2d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3",
		Pusher:     "robot$shop+ci",
		Sender:     "harbor",
		Receiver:   "harbor",
	}
	wantAPICE := wantAPI
	wantAPICE.DeliveryID = "4b2f89a6-548d-4c12-9993-a1f5790b97d2"
	pushedAt := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	floatTime := []byte(`{"type":"PUSH_ARTIFACT","occur_at":"1767366245.5","event_data":{"resources":[{"tag":"t","resource_url":"r.example:5000/a/b:t"}]}}`)

	tests := []imageParseCase{
		{
			name:        "default format push",
			body:        push,
			contentType: "application/json",
			want:        []events.ImagePushed{wantAPI},
			wantIDs:     []string{"harbor/harbor/" + pushKey + "/1.4.2"},
			wantTimes:   []time.Time{pushedAt},
		},
		{
			name:        "default format without content type",
			body:        push,
			contentType: "",
			want:        []events.ImagePushed{wantAPI},
			wantIDs:     []string{"harbor/harbor/" + pushKey + "/1.4.2"},
			wantTimes:   []time.Time{pushedAt},
		},
		{
			name:        "default format, several resources, one by digest, host with port",
			body:        multi,
			contentType: "application/json; charset=utf-8",
			want: []events.ImagePushed{{
				Registry:   "harbor.example.com:8443",
				Repository: "team/platform/app",
				Tag:        "v2.0.0",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				Pusher:     "admin",
				Sender:     "harbor",
				Receiver:   "harbor",
			}, {
				Registry:   "harbor.example.com:8443",
				Repository: "team/platform/app",
				Tag:        "latest",
				Digest:     "sha256:5555555555555555555555555555555555555555555555555555555555555555",
				Pusher:     "admin",
				Sender:     "harbor",
				Receiver:   "harbor",
			}},
			wantIDs: []string{
				"harbor/harbor/" + multiKey + "/v2.0.0",
				"harbor/harbor/" + multiKey + "/latest",
			},
			wantTimes: []time.Time{time.Date(2026, 1, 2, 15, 5, 1, 0, time.UTC), time.Date(2026, 1, 2, 15, 5, 1, 0, time.UTC)},
		},
		{name: "default format push by digest", body: fixture(t, "harbor", "push_untagged.json"), contentType: "application/json", wantIgnored: "untagged push"},
		{name: "pull", body: fixture(t, "harbor", "pull.json"), contentType: "application/json", wantIgnored: "PULL_ARTIFACT"},
		{name: "delete", body: fixture(t, "harbor", "delete.json"), contentType: "application/json", wantIgnored: "DELETE_ARTIFACT"},
		{name: "scan", body: fixture(t, "harbor", "scan_completed.json"), contentType: "application/json", wantIgnored: "SCANNING_COMPLETED"},
		{name: "replication", body: fixture(t, "harbor", "replication.json"), contentType: "application/json", wantIgnored: "REPLICATION"},
		{
			name:        "push with no resources",
			body:        []byte(`{"type":"PUSH_ARTIFACT","event_data":{"resources":[],"repository":{"repo_full_name":"a/b"}}}`),
			contentType: "application/json",
			wantIgnored: "push with no resources",
		},
		{
			name:        "occur_at as float string, repository from resource_url",
			body:        floatTime,
			contentType: "application/json",
			want:        []events.ImagePushed{{Registry: "r.example:5000", Repository: "a/b", Tag: "t", Sender: "harbor", Receiver: "harbor"}},
			wantIDs:     []string{"harbor/harbor/" + bodyKey(harborDelivery(floatTime, "")) + "/t"},
			wantTimes:   []time.Time{pushedAt.Add(500 * time.Millisecond)},
		},
		{
			name:        "unreadable occur_at: receive time",
			body:        []byte(`{"type":"PUSH_ARTIFACT","occur_at":"yesterday","event_data":{"resources":[{"tag":"t","resource_url":"r/a/b:t"}],"repository":{"repo_full_name":"a/b"}}}`),
			contentType: "application/json",
			want:        []events.ImagePushed{{Registry: "r", Repository: "a/b", Tag: "t", Sender: "harbor", Receiver: "harbor"}},
			wantTimes:   []time.Time{received},
		},
		{
			name:        "CloudEvents push",
			body:        fixture(t, "harbor", "cloudevents_push.json"),
			contentType: ce,
			want:        []events.ImagePushed{wantAPICE},
			wantIDs:     []string{"harbor/harbor/4b2f89a6-548d-4c12-9993-a1f5790b97d2"},
			wantTimes:   []time.Time{pushedAt},
			wantDeliv:   "4b2f89a6-548d-4c12-9993-a1f5790b97d2",
		},
		{
			name:        "CloudEvents push with several resources",
			body:        fixture(t, "harbor", "cloudevents_push_multi.json"),
			contentType: ce,
			want: []events.ImagePushed{{
				Registry:   "harbor.example.com",
				Repository: "shop/web",
				Tag:        "2.0.0",
				Digest:     "sha256:6666666666666666666666666666666666666666666666666666666666666666",
				Pusher:     "admin",
				Sender:     "harbor",
				Receiver:   "harbor",
				DeliveryID: "c3d8e1f0-2a4b-4c6d-8e0f-1a2b3c4d5e6f",
			}, {
				Registry:   "harbor.example.com",
				Repository: "shop/web",
				Tag:        "stable",
				Digest:     "sha256:6666666666666666666666666666666666666666666666666666666666666666",
				Pusher:     "admin",
				Sender:     "harbor",
				Receiver:   "harbor",
				DeliveryID: "c3d8e1f0-2a4b-4c6d-8e0f-1a2b3c4d5e6f",
			}},
			wantIDs: []string{
				"harbor/harbor/c3d8e1f0-2a4b-4c6d-8e0f-1a2b3c4d5e6f/2.0.0",
				"harbor/harbor/c3d8e1f0-2a4b-4c6d-8e0f-1a2b3c4d5e6f/stable",
			},
			wantTimes: []time.Time{pushedAt.Add(56 * time.Second), pushedAt.Add(56 * time.Second)},
			wantDeliv: "c3d8e1f0-2a4b-4c6d-8e0f-1a2b3c4d5e6f",
		},
		{
			name:        "CloudEvents push with empty requestid and operator",
			body:        []byte(`{"specversion":"1.0","requestid":"","id":"x","source":"/projects/1/webhook/policies/1","type":"harbor.artifact.pushed","datacontenttype":"application/json","time":"2026-01-02T15:04:05Z","data":{"resources":[{"digest":"sha256:1","tag":"t","resource_url":"h/a/b:t"}],"repository":{"repo_full_name":"a/b"}},"operator":""}`),
			contentType: ce,
			want:        []events.ImagePushed{{Registry: "h", Repository: "a/b", Tag: "t", Digest: "sha256:1", Sender: "harbor", Receiver: "harbor", DeliveryID: "x"}},
			wantIDs:     []string{"harbor/harbor/x"},
			wantTimes:   []time.Time{pushedAt},
			wantDeliv:   "x",
		},
		{
			name:        "CloudEvents pull",
			body:        fixture(t, "harbor", "cloudevents_pull.json"),
			contentType: ce,
			wantIgnored: "harbor.artifact.pulled",
			wantDeliv:   "4b2f89a6-548d-4c12-9993-a1f5790b97d3",
		},
		{
			name:        "CloudEvents push by digest",
			body:        fixture(t, "harbor", "cloudevents_untagged.json"),
			contentType: ce,
			wantIgnored: "untagged push",
			wantDeliv:   "0f1e2d3c-4b5a-4968-8776-655443322110",
		},
		{
			name: "CloudEvents batch",
			body: []byte(`[` + string(fixture(t, "harbor", "cloudevents_pull.json")) + `,` +
				string(fixture(t, "harbor", "cloudevents_untagged.json")) + `]`),
			contentType: mediaCloudEventBatch,
			wantIgnored: "2 events: harbor.artifact.pulled, untagged push",
			wantDeliv:   "4b2f89a6-548d-4c12-9993-a1f5790b97d3,0f1e2d3c-4b5a-4968-8776-655443322110",
		},
		{name: "wrong content type", body: push, contentType: "text/plain", wantErr: ErrUnsupportedMediaType},
		{name: "unparsable content type", body: push, contentType: "application/json; =x", wantErr: ErrUnsupportedMediaType},
		{name: "not JSON", body: []byte(`{"type":`), contentType: "application/json", wantErr: errAny},
		{name: "no type", body: []byte(`{"occur_at":1}`), contentType: "application/json", wantErr: errAny},
		{name: "push without event_data", body: []byte(`{"type":"PUSH_ARTIFACT"}`), contentType: "application/json", wantErr: errAny},
		{
			name:        "push without resource_url",
			body:        []byte(`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"t"}],"repository":{"repo_full_name":"a/b"}}}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{
			name:        "push without repository",
			body:        []byte(`{"type":"PUSH_ARTIFACT","event_data":{"resources":[{"tag":"t","resource_url":"r"}]}}`),
			contentType: "application/json",
			wantErr:     errAny,
		},
		{name: "CloudEvent not JSON", body: []byte(`{"specversion":`), contentType: ce, wantErr: errAny},
		{
			name:        "CloudEvent without id",
			body:        []byte(`{"specversion":"1.0","source":"/projects/1/webhook/policies/1","type":"harbor.artifact.pushed","data":{}}`),
			contentType: ce,
			wantErr:     errAny,
		},
		{
			name:        "CloudEvent push without data",
			body:        []byte(`{"specversion":"1.0","id":"x","source":"/projects/1/webhook/policies/1","type":"harbor.artifact.pushed"}`),
			contentType: ce,
			wantErr:     errAny,
		},
		{
			name:        "CloudEvent push with data not an object",
			body:        []byte(`{"specversion":"1.0","id":"x","source":"/p","type":"harbor.artifact.pushed","datacontenttype":"application/json","data":[1]}`),
			contentType: ce,
			wantErr:     errAny,
		},
	}
	runImageParseCases(t, "harbor", HarborSender{}.Parse, func(body []byte) *Delivery { return harborDelivery(body, "") }, tests)
}

// TestHarborParseBinaryCloudEvent covers a CloudEvent in binary mode, which
// Harbor does not send today but a relay in front of it may.
func TestHarborParseBinaryCloudEvent(t *testing.T) {
	d := harborDelivery([]byte(`{"resources":[{"digest":"sha256:1","tag":"1.0","resource_url":"harbor.example.com/shop/api:1.0"}],"repository":{"repo_full_name":"shop/api"}}`), "application/json")
	for k, v := range map[string]string{
		"Ce-Specversion": "1.0",
		"Ce-Id":          "bin-1",
		"Ce-Source":      "/projects/3/webhook/policies/7",
		"Ce-Type":        "harbor.artifact.pushed",
		"Ce-Operator":    "admin",
	} {
		d.Header.Set(k, v)
	}
	res, err := HarborSender{}.Parse(d)
	if err != nil {
		t.Fatal(err)
	}
	want := []events.ImagePushed{{Registry: "harbor.example.com", Repository: "shop/api", Tag: "1.0", Digest: "sha256:1", Pusher: "admin", Sender: "harbor", Receiver: "harbor", DeliveryID: "bin-1"}}
	if diff := cmp.Diff(want, payloads[events.ImagePushed](t, res.Events)); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	if len(res.Events) == 1 && (res.Events[0].ID() != "harbor/harbor/bin-1" || !res.Events[0].Time().Equal(received)) {
		t.Errorf("id %q time %v", res.Events[0].ID(), res.Events[0].Time())
	}
}

// TestHarborParseReplay checks that a redelivery yields the same event ids,
// so the journal drops it.
func TestHarborParseReplay(t *testing.T) {
	for _, tc := range []struct{ file, contentType string }{
		{"push.json", "application/json"},
		{"push_multi.json", "application/json"},
		{"cloudevents_push.json", mediaCloudEvent},
		{"cloudevents_push_multi.json", mediaCloudEvent},
	} {
		t.Run(tc.file, func(t *testing.T) {
			body := fixture(t, "harbor", tc.file)
			first, err := HarborSender{}.Parse(harborDelivery(body, tc.contentType))
			if err != nil {
				t.Fatal(err)
			}
			again := harborDelivery(append([]byte(nil), body...), tc.contentType)
			again.ReceivedAt = received.Add(time.Hour)
			second, err := HarborSender{}.Parse(again)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(registryEventIDs(first), registryEventIDs(second)); diff != "" || len(registryEventIDs(first)) == 0 {
				t.Errorf("ids differ on redelivery (-first +second):\n%s", diff)
			}
		})
	}
}

func TestHarborAuthenticate(t *testing.T) {
	const secret = "harbor-hook-s3cret"
	tests := []struct {
		name   string
		header []string
		secret string
		wantOK bool
	}{
		{"verbatim auth header", []string{"Authorization", secret}, secret, true},
		{"bearer form", []string{"Authorization", "Bearer " + secret}, secret, true},
		{"auth header configured with its scheme", []string{"Authorization", "Bearer " + secret}, "Bearer " + secret, true},
		{"basic credentials", []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("harbor:"+secret))}, "harbor:" + secret, true},
		{"wrong secret", []string{"Authorization", "not-it"}, secret, false},
		{"secret as prefix", []string{"Authorization", secret + "x"}, secret, false},
		{"missing header", nil, secret, false},
		{"other header", []string{"X-Harbor-Token", secret}, secret, false},
		{"empty secret never matches", []string{"Authorization", ""}, "", false},
		{"empty secret, any header", []string{"Authorization", "anything"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := harborDelivery(fixture(t, "harbor", "push.json"), "application/json")
			for i := 0; i+1 < len(tt.header); i += 2 {
				d.Header.Set(tt.header[i], tt.header[i+1])
			}
			checkAuth(t, HarborSender{Secret: tt.secret}, d, tt.wantOK)
		})
	}
	t.Run("configured header", func(t *testing.T) {
		d := harborDelivery(fixture(t, "harbor", "push.json"), "application/json")
		d.Header.Set("X-Harbor-Token", secret)
		checkAuth(t, HarborSender{Secret: secret, Header: "x-harbor-token"}, d, true)
		checkAuth(t, HarborSender{Secret: secret}, d, false)
	})
}

func TestNewHarborSender(t *testing.T) {
	s, err := newHarborSender(ReceiverConfig{Name: "h", Type: SenderHarbor, Secret: "s", Header: "X-Harbor-Token"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(HarborSender{Secret: "s", Header: "X-Harbor-Token"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
	for _, h := range []string{"X Token", "X-Token:", "Tökén"} {
		if _, err := newHarborSender(ReceiverConfig{Secret: "s", Header: h}); err == nil {
			t.Errorf("newHarborSender(header %q) = %v, want an error", h, err)
		}
	}
}

func FuzzHarborParse(f *testing.F) {
	seedFixtures(f, "harbor")
	f.Add([]byte(`{"type":"PUSH_ARTIFACT","occur_at":1e300,"event_data":{"resources":[{"tag":"t","resource_url":"://"}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, ct := range []string{"application/json", mediaCloudEvent, mediaCloudEventBatch} {
			res, err := HarborSender{}.Parse(harborDelivery(body, ct))
			checkFuzzResult(t, res, err)
		}
	})
}

// registryEventIDs lists the ids of a result's events.
func registryEventIDs(res Result) []string {
	ids := make([]string, 0, len(res.Events))
	for _, e := range res.Events {
		ids = append(ids, e.ID())
	}
	return ids
}
