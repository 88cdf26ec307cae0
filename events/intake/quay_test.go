package intake

import (
	"slices"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

func quayDelivery(body []byte, token string) *Delivery {
	return &Delivery{
		Receiver:   "quay",
		Header:     header("Content-Type", "application/json", "User-Agent", "python-requests/2.32.3"),
		Body:       body,
		PathToken:  token,
		ReceivedAt: received,
	}
}

func TestQuayParse(t *testing.T) {
	pushed := func(registry, repo string, tags ...string) []events.ImagePushed {
		var out []events.ImagePushed
		for _, tag := range tags {
			out = append(out, events.ImagePushed{Registry: registry, Repository: repo, Tag: tag, Sender: "quay", Receiver: "quay"})
		}
		return out
	}
	tests := []struct {
		name        string
		body        []byte
		file        string
		contentType string
		want        []events.ImagePushed
		wantIgnored string
		wantErr     error
	}{
		{name: "push", file: "push.json", want: pushed("quay.io", "acme/api", "1.4.2")},
		{
			name: "several tags, sorted, duplicates dropped; self-hosted host with port",
			file: "push_tags_self_hosted.json",
			want: pushed("quay.example.com:8443", "shop/web", "latest", "v2.0", "v2.0.0"),
		},
		{
			name: "very old Quay: updated_tags is a map, no docker_url",
			file: "push_legacy_map.json",
			want: pushed("quay.io", "acme/api", "1.4.1", "latest"),
		},
		{name: "empty updated_tags", file: "no_tags.json", wantIgnored: "no updated tags"},
		{name: "empty map of updated tags", body: []byte(`{"repository":"a/b","updated_tags":{}}`), wantIgnored: "no updated tags"},
		{name: "only empty tag names", body: []byte(`{"repository":"a/b","updated_tags":["",null]}`), wantIgnored: "no updated tags"},
		{name: "build notification", file: "build_success.json", wantIgnored: "not a repo_push: no updated_tags"},
		{name: "updated_tags null", body: []byte(`{"repository":"a/b","updated_tags":null}`), wantIgnored: "not a repo_push: no updated_tags"},
		{name: "empty object", body: []byte(`{}`), wantIgnored: "not a repo_push: no updated_tags"},
		{
			name: "docker_url with a scheme and a trailing slash",
			body: []byte(`{"repository":"acme/api","docker_url":"https://quay.example.com/acme/api/","updated_tags":["1"]}`),
			want: pushed("quay.example.com", "acme/api", "1"),
		},
		{
			name: "docker_url names only the host",
			body: []byte(`{"repository":"acme/api","docker_url":"quay.example.com","updated_tags":["1"]}`),
			want: pushed("quay.example.com", "acme/api", "1"),
		},
		{
			name: "no repository field: namespace and name",
			body: []byte(`{"namespace":"acme","name":"api","updated_tags":["1"]}`),
			want: pushed("quay.io", "acme/api", "1"),
		},
		{name: "tags but no repository", body: []byte(`{"updated_tags":["1"]}`), wantErr: errAny},
		{name: "updated_tags a string", body: []byte(`{"repository":"a/b","updated_tags":"latest"}`), wantErr: errAny},
		{name: "updated_tags of numbers", body: []byte(`{"repository":"a/b","updated_tags":[1,2]}`), wantErr: errAny},
		{name: "not JSON", body: []byte(`<html>`), wantErr: errAny},
		{name: "truncated", body: []byte(`{"repository":"a/b","updated_tags":["1"`), wantErr: errAny},
		{name: "wrong content type", file: "push.json", contentType: "text/plain", wantErr: ErrUnsupportedMediaType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := tt.body
			if tt.file != "" {
				body = fixture(t, "quay", tt.file)
			}
			d := quayDelivery(body, "")
			if tt.contentType != "" {
				d.Header.Set("Content-Type", tt.contentType)
			}
			res, err := QuaySender{}.Parse(d)
			if checkParseErr(t, err, tt.wantErr) {
				return
			}
			var wantIDs []string
			var wantTimes []time.Time
			for _, p := range tt.want {
				wantIDs = append(wantIDs, "quay/quay/"+bodyKey(d)+"/"+p.Tag)
				wantTimes = append(wantTimes, received)
			}
			checkImageEvents(t, res, "quay", tt.want, wantIDs, wantTimes)
			if res.Ignored != tt.wantIgnored {
				t.Errorf("Ignored = %q, want %q", res.Ignored, tt.wantIgnored)
			}
		})
	}
}

func TestQuayRedeliveryDedupes(t *testing.T) {
	ids := func(body []byte) []string {
		t.Helper()
		res, err := QuaySender{}.Parse(quayDelivery(body, ""))
		if err != nil || len(res.Events) == 0 {
			t.Fatalf("Parse: %v, %d events", err, len(res.Events))
		}
		return eventIDs(res.Events)
	}
	body := fixture(t, "quay", "push_tags_self_hosted.json")
	if a, b := ids(body), ids(slices.Clone(body)); !slices.Equal(a, b) {
		t.Errorf("same delivery, different ids %q %q", a, b)
	}
	// The map shape has no order: the ids must not depend on it.
	m1 := []byte(`{"repository":"a/b","updated_tags":{"x":"1","y":"2"}}`)
	for range 10 {
		if diff := cmp.Diff(ids(m1), ids(m1)); diff != "" {
			t.Fatalf("map-shaped tags, ids differ (-first +second):\n%s", diff)
		}
	}
	if a, b := ids(fixture(t, "quay", "push.json")), ids([]byte(`{"repository":"acme/api","docker_url":"quay.io/acme/api","updated_tags":["1.4.3"]}`)); a[0] == b[0] {
		t.Errorf("two pushes, same id %q", a[0])
	}
}

func TestQuayAuthenticate(t *testing.T) {
	const secret = "quay-4b3c2d1e0f"
	push := fixture(t, "quay", "push.json")
	tests := []struct {
		name   string
		token  string
		secret string
		wantOK bool
	}{
		{"right path token", secret, secret, true},
		{"wrong path token", "quay-0000000000", secret, false},
		{"secret as prefix", secret + "0", secret, false},
		{"truncated token", secret[:4], secret, false},
		{"no path token", "", secret, false},
		{"empty secret never matches", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkAuth(t, QuaySender{Secret: tt.secret}, quayDelivery(push, tt.token), tt.wantOK)
		})
	}
	if !usesPathToken(QuaySender{}) {
		t.Error("QuaySender does not take path tokens: the intake would answer 404")
	}
}

func TestNewQuaySender(t *testing.T) {
	s, err := newQuaySender(ReceiverConfig{Name: "quay", Type: SenderQuay, Secret: "s", Header: "X-Ignored"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(QuaySender{Secret: "s"}, s); diff != "" {
		t.Errorf("sender (-want +got):\n%s", diff)
	}
}

func FuzzQuay(f *testing.F) {
	seedFixtures(f, "quay")
	f.Add([]byte(`{"docker_url":"//","updated_tags":{"a":null}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := QuaySender{}.Parse(quayDelivery(body, ""))
		checkFuzzResult(t, res, err)
	})
}
