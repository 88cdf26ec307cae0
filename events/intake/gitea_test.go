package intake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

const (
	giteaDeliveryID = "d4f0e2a6-1b3c-4d5e-8f9a-0b1c2d3e4f5a"
	giteaSecret     = "gitea-s3cret"
)

// giteaDelivery is a delivery as Gitea sends it: the Gitea, Gogs and GitHub
// headers alike.
func giteaDelivery(event string, body []byte, contentType string) *Delivery {
	return &Delivery{
		Receiver: "forge",
		Header: header(
			"Content-Type", contentType,
			"User-Agent", "Go-http-client/1.1",
			"X-Gitea-Delivery", giteaDeliveryID,
			"X-Gitea-Event", event,
			"X-Gitea-Event-Type", event,
			"X-Gogs-Delivery", giteaDeliveryID,
			"X-Gogs-Event", event,
			"X-Gogs-Event-Type", event,
			"X-GitHub-Delivery", giteaDeliveryID,
			"X-GitHub-Event", event,
			"X-GitHub-Event-Type", event,
		),
		Body:       body,
		ReceivedAt: received,
	}
}

// forgejoDelivery is a delivery as Forgejo sends it: Gitea's headers plus
// the X-Forgejo ones.
func forgejoDelivery(event string, body []byte) *Delivery {
	return gitWithHeaders(giteaDelivery(event, body, "application/json"),
		"X-Forgejo-Delivery", giteaDeliveryID,
		"X-Forgejo-Event", event,
		"X-Forgejo-Event-Type", event)
}

func giteaHexSig(secret string, payload []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(payload)
	return hex.EncodeToString(mac.Sum(nil))
}

// giteaSign sets every signature header Gitea sends, over payload.
func giteaSign(d *Delivery, secret string, payload []byte) *Delivery {
	sig := giteaHexSig(secret, payload)
	return gitWithHeaders(d, "X-Gitea-Signature", sig, "X-Gogs-Signature", sig, "X-Hub-Signature-256", "sha256="+sig)
}

func TestGiteaParse(t *testing.T) {
	push := fixture(t, "gitea", "push.json")
	wantPush := events.GitPushed{
		RepoURL: "https://git.example.com/shop/deployments.git",
		Ref:     "refs/heads/main",
		Branch:  "main",
		Before:  "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		After:   "67b56589a45103f891bdee7c0546e5d40bc02001",
		ChangedPaths: []string{
			"apps/api/kustomization.yaml",
			"apps/api/values.yaml",
			"apps/web/canary.yaml",
			"apps/web/hpa-legacy.yaml",
		},
		Pusher:     "kim",
		Sender:     "gitea",
		Receiver:   "forge",
		DeliveryID: giteaDeliveryID,
	}
	forgejoPush := wantPush
	forgejoPush.Sender = "forgejo"
	noDelivery := wantPush
	noDelivery.DeliveryID = ""
	tests := []gitParseCase{
		{name: "push JSON", d: giteaDelivery("push", push, "application/json"), want: []events.GitPushed{wantPush}},
		{name: "push form-encoded", d: giteaDelivery("push", formEncoded(push), "application/x-www-form-urlencoded"), want: []events.GitPushed{wantPush}},
		{name: "push without content type", d: giteaDelivery("push", push, ""), want: []events.GitPushed{wantPush}},
		{name: "forgejo push", s: GiteaSender{Type: SenderForgejo}, d: forgejoDelivery("push", push), want: []events.GitPushed{forgejoPush}},
		{
			name: "GitHub-style headers only",
			d: gitWithHeaders(giteaDelivery("push", push, "application/json"),
				"X-Gitea-Event", "", "X-Gitea-Delivery", ""),
			want: []events.GitPushed{wantPush},
		},
		{
			name: "no delivery header",
			d: gitWithHeaders(giteaDelivery("push", push, "application/json"),
				"X-Gitea-Delivery", "", "X-GitHub-Delivery", ""),
			want: []events.GitPushed{noDelivery}, wantID: "forge/gitea/" + bodyKey(&Delivery{Body: push}),
		},
		{
			name: "more commits than listed: no partial paths",
			d:    giteaDelivery("push", fixture(t, "gitea", "push_truncated.json"), "application/json"),
			want: []events.GitPushed{{
				RepoURL:    "https://git.example.com/shop/deployments.git",
				Ref:        "refs/heads/main",
				Branch:     "main",
				Before:     "f9d6b2dd0052ff6456a5859355f7c4cae4156961",
				After:      "da5bd0a2e591036c7b35f7efdd85d967781b6c25",
				Pusher:     "kim",
				Sender:     "gitea",
				Receiver:   "forge",
				DeliveryID: giteaDeliveryID,
			}},
		},
		{
			name: "tag push",
			d:    giteaDelivery("push", fixture(t, "gitea", "tag_push.json"), "application/json"),
			want: []events.GitPushed{{
				RepoURL:    "https://git.example.com/shop/api.git",
				Ref:        "refs/tags/v1.4.2",
				Tag:        "v1.4.2",
				Before:     "0000000000000000000000000000000000000000",
				After:      "5b7d1e8a9c3f2a4b6d8e0f1a3c5e7a9b1d3f5a7c",
				Pusher:     "release-bot",
				Sender:     "gitea",
				Receiver:   "forge",
				DeliveryID: giteaDeliveryID,
			}},
		},
		{
			name: "repository URL from html_url, pusher from username",
			d:    giteaDelivery("push", []byte(`{"ref":"refs/heads/main","after":"1111111111111111111111111111111111111111","repository":{"html_url":"https://git.example.com/shop/app"},"pusher":{"username":"kim"},"total_commits":"0"}`), "application/json"),
			want: []events.GitPushed{{
				RepoURL: "https://git.example.com/shop/app.git", Ref: "refs/heads/main", Branch: "main",
				After: "1111111111111111111111111111111111111111", Pusher: "kim",
				Sender: "gitea", Receiver: "forge", DeliveryID: giteaDeliveryID,
			}},
		},
		{
			name:        "branch delete pushed",
			d:           giteaDelivery("push", fixture(t, "gitea", "branch_delete.json"), "application/json"),
			wantIgnored: "branch delete refs/heads/feature/old-canary",
		},
		{
			name:        "delete event",
			d:           giteaDelivery("delete", fixture(t, "gitea", "delete.json"), "application/json"),
			wantIgnored: `event "delete"`,
		},
		{
			name:        "create event",
			s:           GiteaSender{Type: SenderForgejo},
			d:           forgejoDelivery("create", fixture(t, "gitea", "create.json")),
			wantIgnored: `event "create"`,
		},
		{name: "missing event headers", d: giteaDelivery("", push, "application/json"), wantErr: errAny},
		{name: "not JSON", d: giteaDelivery("push", []byte(`{"ref":`), "application/json"), wantErr: errAny},
		{name: "no ref", d: giteaDelivery("push", []byte(`{"repository":{"clone_url":"https://x/y.git"}}`), "application/json"), wantErr: errAny},
		{name: "no repository", d: giteaDelivery("push", []byte(`{"ref":"refs/heads/main"}`), "application/json"), wantErr: errAny},
		{name: "count not a number", d: giteaDelivery("push", []byte(`{"ref":"refs/heads/main","repository":{"clone_url":"https://x/y.git"},"total_commits":true}`), "application/json"), wantErr: errAny},
		{name: "form without payload", d: giteaDelivery("push", []byte(`data=1`), "application/x-www-form-urlencoded"), wantErr: errAny},
		{name: "bad form", d: giteaDelivery("push", []byte(`payload=%zz`), "application/x-www-form-urlencoded"), wantErr: errAny},
		{name: "unsupported content type", d: giteaDelivery("push", push, "text/xml"), wantErr: ErrUnsupportedMediaType},
		{name: "unparsable content type", d: giteaDelivery("push", push, "application/json; =x"), wantErr: ErrUnsupportedMediaType},
	}
	runGitParseCases(t, GiteaSender{}.Parse, giteaDeliveryID, func(tt gitParseCase, _ events.GitPushed) string {
		s, _ := tt.s.(GiteaSender) // nil: the zero GiteaSender, Gitea
		return "forge/" + s.sender() + "/" + giteaDeliveryID
	}, tests)
}

func TestGiteaReplay(t *testing.T) {
	push := fixture(t, "gitea", "push.json")
	parse := func(d *Delivery) []string {
		t.Helper()
		res, err := GiteaSender{}.Parse(d)
		if err != nil || len(res.Events) != 1 {
			t.Fatalf("Parse = %v, %v", res, err)
		}
		return gitEventIDs(res)
	}
	first := checkReplay(t, GiteaSender{}.Parse, giteaDelivery("push", push, "application/json"), giteaDelivery("push", push, "application/json"), 1)
	other := parse(gitWithHeaders(giteaDelivery("push", push, "application/json"),
		"X-Gitea-Delivery", "0f3c2b1a-9e8d-4c7b-a6f5-e4d3c2b1a090"))
	if other[0] == first[0] {
		t.Error("another delivery got the same event id")
	}
}

func TestGiteaAuthenticate(t *testing.T) {
	push := fixture(t, "gitea", "push.json")
	form := formEncoded(push)
	modified := append([]byte(nil), push...)
	modified[len(modified)-2] = ' '
	good := giteaHexSig(giteaSecret, push)
	bad := giteaHexSig("guess", push)
	tests := []struct {
		name    string
		body    []byte
		ct      string
		headers []string // signature headers to set
		wantOK  bool
	}{
		{"all Gitea signatures", push, "application/json", []string{"X-Gitea-Signature", good, "X-Gogs-Signature", good, "X-Hub-Signature-256", "sha256=" + good}, true},
		{"X-Gitea-Signature alone", push, "application/json", []string{"X-Gitea-Signature", good}, true},
		{"X-Forgejo-Signature alone", push, "application/json", []string{"X-Forgejo-Signature", good}, true},
		{"X-Hub-Signature-256 alone", push, "application/json", []string{"X-Hub-Signature-256", "sha256=" + good}, true},
		{"Forgejo's four signatures", push, "application/json", []string{"X-Forgejo-Signature", good, "X-Gitea-Signature", good, "X-Gogs-Signature", good, "X-Hub-Signature-256", "sha256=" + good}, true},
		{"form-encoded, signed over the payload", form, "application/x-www-form-urlencoded", []string{"X-Gitea-Signature", good}, true},
		{"form-encoded, signed over the raw body", form, "application/x-www-form-urlencoded", []string{"X-Gitea-Signature", giteaHexSig(giteaSecret, form)}, false},
		{"form-encoded without payload", []byte("data=1"), "application/x-www-form-urlencoded", []string{"X-Gitea-Signature", giteaHexSig(giteaSecret, nil)}, false},
		{"wrong secret", push, "application/json", []string{"X-Gitea-Signature", bad, "X-Hub-Signature-256", "sha256=" + bad}, false},
		{"one right, one forged", push, "application/json", []string{"X-Gitea-Signature", good, "X-Hub-Signature-256", "sha256=" + bad}, false},
		{"one right, one malformed", push, "application/json", []string{"X-Forgejo-Signature", good, "X-Gitea-Signature", "zz"}, false},
		{"missing signatures", push, "application/json", nil, false},
		{"only the unchecked X-Gogs-Signature", push, "application/json", []string{"X-Gogs-Signature", good}, false},
		{"signature over a modified body", modified, "application/json", []string{"X-Gitea-Signature", good}, false},
		{"hub signature without prefix", push, "application/json", []string{"X-Hub-Signature-256", good}, false},
		{"gitea signature with prefix", push, "application/json", []string{"X-Gitea-Signature", "sha256=" + good}, false},
		{"truncated", push, "application/json", []string{"X-Gitea-Signature", good[:20]}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := gitWithHeaders(giteaDelivery("push", tt.body, tt.ct), tt.headers...)
			checkAuth(t, GiteaSender{Secret: giteaSecret}, d, tt.wantOK)
		})
	}
	t.Run("empty secret never matches", func(t *testing.T) {
		d := giteaSign(giteaDelivery("push", push, "application/json"), "", push)
		checkAuth(t, GiteaSender{Secret: ""}, d, false)
	})
	t.Run("empty signature headers of a hook without secret", func(t *testing.T) {
		d := giteaDelivery("push", push, "application/json")
		d.Header["X-Gitea-Signature"] = []string{""}
		d.Header["X-Hub-Signature-256"] = []string{"sha256="}
		checkAuth(t, GiteaSender{Secret: giteaSecret}, d, false)
	})
}

func TestNewGiteaSender(t *testing.T) {
	for _, tt := range []struct{ typ, want string }{
		{SenderGitea, SenderGitea},
		{SenderForgejo, SenderForgejo},
		{"", SenderGitea},
	} {
		s, err := newGiteaSender(ReceiverConfig{Name: "forge", Type: tt.typ, Secret: "x"})
		if err != nil || s != (GiteaSender{Secret: "x", Type: tt.want}) {
			t.Errorf("newGiteaSender(%q) = %#v, %v", tt.typ, s, err)
		}
	}
}

func FuzzGiteaParse(f *testing.F) {
	seedFixtures(f, "gitea")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []*Delivery{
			giteaDelivery("push", body, "application/json"),
			giteaDelivery("push", body, "application/x-www-form-urlencoded"),
		} {
			res, err := GiteaSender{}.Parse(d)
			checkFuzzResult(t, res, err)
			// Authenticate reads the body too; it must only ever say no.
			d.Header.Set("X-Gitea-Signature", giteaHexSig("other", body))
			if err := (GiteaSender{Secret: giteaSecret}).Authenticate(t.Context(), d); err == nil || !fault.IsPermanent(err) {
				t.Fatalf("Authenticate of a forged delivery = %v", err)
			}
		}
	})
}
