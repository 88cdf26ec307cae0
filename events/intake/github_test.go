package intake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/flotilla-cd/flotilla/events"
)

const githubDeliveryID = "72d3162e-cc78-11e3-81ab-4c9367dc0958"

func githubDelivery(event string, body []byte, contentType string) *Delivery {
	return &Delivery{
		Receiver: "gh",
		Header: header(
			"Content-Type", contentType,
			"X-GitHub-Event", event,
			"X-GitHub-Delivery", githubDeliveryID,
			"User-Agent", "GitHub-Hookshot/044aadd",
		),
		Body:       body,
		ReceivedAt: received,
	}
}

// formEncoded is body as GitHub sends it with content type "form".
func formEncoded(body []byte) []byte {
	return []byte(url.Values{"payload": {string(body)}}.Encode())
}

func githubSign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestGitHubParse(t *testing.T) {
	push := fixture(t, "github", "push.json")
	wantPush := events.GitPushed{
		RepoURL: "https://github.com/shop/deployments.git",
		Ref:     "refs/heads/main",
		Branch:  "main",
		Before:  "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		After:   "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
		ChangedPaths: []string{
			"apps/api/kustomization.yaml",
			"apps/api/values.yaml",
			"apps/web/canary.yaml",
			"apps/web/hpa-legacy.yaml",
		},
		Pusher:     "octo-dev",
		Sender:     "github",
		Receiver:   "gh",
		DeliveryID: githubDeliveryID,
	}
	tests := []gitParseCase{
		{name: "push JSON", d: githubDelivery("push", push, "application/json"), want: []events.GitPushed{wantPush}},
		{name: "push form-encoded", d: githubDelivery("push", formEncoded(push), "application/x-www-form-urlencoded"), want: []events.GitPushed{wantPush}},
		{name: "push without content type", d: githubDelivery("push", push, ""), want: []events.GitPushed{wantPush}},
		{
			name: "tag push",
			d:    githubDelivery("push", fixture(t, "github", "tag_push.json"), "application/json"),
			want: []events.GitPushed{{
				RepoURL:    "https://github.com/shop/api.git",
				Ref:        "refs/tags/v1.4.2",
				Tag:        "v1.4.2",
				Before:     "0000000000000000000000000000000000000000",
				After:      "5b7d1e8a9c3f2a4b6d8e0f1a3c5e7a9b1d3f5a7c",
				Pusher:     "release-bot",
				Sender:     "github",
				Receiver:   "gh",
				DeliveryID: githubDeliveryID,
			}},
		},
		{
			name:        "branch delete",
			d:           githubDelivery("push", fixture(t, "github", "branch_delete.json"), "application/json"),
			wantIgnored: "branch delete refs/heads/feature/old-canary",
		},
		{name: "ping", d: githubDelivery("ping", fixture(t, "github", "ping.json"), "application/json"), wantIgnored: "ping"},
		{name: "other event", d: githubDelivery("issues", []byte(`{}`), "application/json"), wantIgnored: `event "issues"`},
		{
			name: "missing delivery header",
			d: func() *Delivery {
				d := githubDelivery("push", push, "application/json")
				d.Header.Del("X-GitHub-Delivery")
				return d
			}(),
			wantErr: errAny,
		},
		{name: "missing event header", d: githubDelivery("", push, "application/json"), wantErr: errAny},
		{name: "not JSON", d: githubDelivery("push", []byte(`{"ref":`), "application/json"), wantErr: errAny},
		{name: "no ref", d: githubDelivery("push", []byte(`{"repository":{"clone_url":"https://x/y.git"}}`), "application/json"), wantErr: errAny},
		{name: "no repository", d: githubDelivery("push", []byte(`{"ref":"refs/heads/main"}`), "application/json"), wantErr: errAny},
		{name: "form without payload", d: githubDelivery("push", []byte(`data=1`), "application/x-www-form-urlencoded"), wantErr: errAny},
		{name: "bad form", d: githubDelivery("push", []byte(`payload=%zz`), "application/x-www-form-urlencoded"), wantErr: errAny},
		{name: "unsupported content type", d: githubDelivery("push", push, "text/xml"), wantErr: ErrUnsupportedMediaType},
		{name: "unparsable content type", d: githubDelivery("push", push, "application/json; =x"), wantErr: ErrUnsupportedMediaType},
	}
	runGitParseCases(t, GitHubSender{}.Parse, githubDeliveryID, func(gitParseCase, events.GitPushed) string {
		return "gh/github/" + githubDeliveryID
	}, tests)
}

func TestGitHubAuthenticate(t *testing.T) {
	const secret = "It's a Secret to Everybody"
	push := fixture(t, "github", "push.json")
	form := formEncoded(push)
	modified := append([]byte(nil), push...)
	modified[len(modified)-2] = ' '
	tests := []struct {
		name      string
		body      []byte
		signature string // "" leaves the header out
		wantOK    bool
	}{
		{"right secret", push, githubSign(secret, push), true},
		{"form-encoded, signed over the raw form body", form, githubSign(secret, form), true},
		{"form-encoded, signed over the payload only", form, githubSign(secret, push), false},
		{"wrong secret", push, githubSign("guess", push), false},
		{"missing header", push, "", false},
		{"signature over a modified body", modified, githubSign(secret, push), false},
		{"sha1 prefix", push, "sha1=" + githubSign(secret, push)[7:], false},
		{"not hex", push, "sha256=zz", false},
		{"truncated", push, githubSign(secret, push)[:20], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := githubDelivery("push", tt.body, "application/json")
			if tt.signature != "" {
				d.Header.Set("X-Hub-Signature-256", tt.signature)
			}
			checkAuth(t, GitHubSender{Secret: secret}, d, tt.wantOK)
		})
	}
	t.Run("empty secret never matches", func(t *testing.T) {
		d := githubDelivery("push", push, "application/json")
		d.Header.Set("X-Hub-Signature-256", githubSign("", push))
		checkAuth(t, GitHubSender{Secret: ""}, d, false)
	})
}

func FuzzGitHubParse(f *testing.F) {
	seedFixtures(f, "github")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, d := range []*Delivery{
			githubDelivery("push", body, "application/json"),
			githubDelivery("push", body, "application/x-www-form-urlencoded"),
		} {
			res, err := GitHubSender{}.Parse(d)
			checkFuzzResult(t, res, err)
		}
	})
}
