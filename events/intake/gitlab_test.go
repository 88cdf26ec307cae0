package intake

import (
	"encoding/base64"
	"slices"
	"testing"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/google/go-cmp/cmp"
)

const (
	gitlabIdempotencyKey = "908a6d9e-45fd-46c8-97e6-c4f350f219dd"
	gitlabEventUUID      = "0b7a6d2c-3f41-4a5e-9d8c-7e6f5a4b3c2d"
	gitlabWebhookUUID    = "5c1e9f0a-8b7d-4c6e-a5f4-3d2c1b0a9f8e"
	gitlabToken          = "gl-hook-s3cret"
)

func gitlabDelivery(event string, body []byte) *Delivery {
	return &Delivery{
		Receiver: "gl",
		Header: header(
			"Content-Type", "application/json",
			"User-Agent", "GitLab/18.7.0",
			"X-Gitlab-Event", event,
			"X-Gitlab-Token", gitlabToken,
			"X-Gitlab-Instance", "https://gitlab.example.com",
			"Idempotency-Key", gitlabIdempotencyKey,
			"X-Gitlab-Event-UUID", gitlabEventUUID,
			"X-Gitlab-Webhook-UUID", gitlabWebhookUUID,
		),
		Body:       body,
		ReceivedAt: received,
	}
}

// gitWithHeaders returns d with the headers set ("" deletes one).
func gitWithHeaders(d *Delivery, kv ...string) *Delivery {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			d.Header.Del(kv[i])
		} else {
			d.Header.Set(kv[i], kv[i+1])
		}
	}
	return d
}

func TestGitLabParse(t *testing.T) {
	push := fixture(t, "gitlab", "push.json")
	wantPush := events.GitPushed{
		RepoURL: "https://gitlab.example.com/shop/deployments.git",
		Ref:     "refs/heads/main",
		Branch:  "main",
		Before:  "95790bf891e76fee5e1747ab589903a6a1f80f22",
		After:   "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
		ChangedPaths: []string{
			"apps/api/kustomization.yaml",
			"apps/api/values.yaml",
			"apps/web/canary.yaml",
			"apps/web/hpa-legacy.yaml",
		},
		Pusher:     "jdev",
		Sender:     "gitlab",
		Receiver:   "gl",
		DeliveryID: gitlabIdempotencyKey,
	}
	withID := func(p events.GitPushed, id string) events.GitPushed { p.DeliveryID = id; return p }
	tests := []gitParseCase{
		{name: "push", d: gitlabDelivery("Push Hook", push), want: []events.GitPushed{wantPush}},
		{
			name: "push without content type",
			d:    gitWithHeaders(gitlabDelivery("Push Hook", push), "Content-Type", ""),
			want: []events.GitPushed{wantPush},
		},
		{
			name: "push without Idempotency-Key (GitLab before 17.4)",
			d:    gitWithHeaders(gitlabDelivery("Push Hook", push), "Idempotency-Key", ""),
			want: []events.GitPushed{withID(wantPush, gitlabEventUUID)}, wantID: "gl/gitlab/" + gitlabEventUUID,
		},
		{
			name: "push with only X-Gitlab-Webhook-UUID",
			d:    gitWithHeaders(gitlabDelivery("Push Hook", push), "Idempotency-Key", "", "X-Gitlab-Event-UUID", ""),
			want: []events.GitPushed{withID(wantPush, gitlabWebhookUUID)}, wantID: "gl/gitlab/" + gitlabWebhookUUID,
		},
		{
			name: "push without any delivery id",
			d:    gitWithHeaders(gitlabDelivery("Push Hook", push), "Idempotency-Key", "", "X-Gitlab-Event-UUID", "", "X-Gitlab-Webhook-UUID", ""),
			want: []events.GitPushed{withID(wantPush, "")}, wantID: "gl/gitlab/" + bodyKey(&Delivery{Body: push}),
		},
		{
			name: "more commits than listed: no partial paths",
			d:    gitlabDelivery("Push Hook", fixture(t, "gitlab", "push_truncated.json")),
			want: []events.GitPushed{{
				RepoURL:    "https://gitlab.example.com/shop/deployments.git",
				Ref:        "refs/heads/main",
				Branch:     "main",
				Before:     "818e015feb2e0f4164dbdff9dcfba781e78f4f86",
				After:      "a4764c0bd3e888f89d2be826b0858cf713a7e662",
				Pusher:     "jdev",
				Sender:     "gitlab",
				Receiver:   "gl",
				DeliveryID: gitlabIdempotencyKey,
			}},
		},
		{
			name: "tag push",
			d:    gitlabDelivery("Tag Push Hook", fixture(t, "gitlab", "tag_push.json")),
			want: []events.GitPushed{{
				RepoURL:      "https://gitlab.example.com/shop/api.git",
				Ref:          "refs/tags/v1.4.2",
				Tag:          "v1.4.2",
				Before:       "0000000000000000000000000000000000000000",
				After:        "82b3d5ae55f7080f1e6022629cdb57bfae7cccc7",
				ChangedPaths: []string{"VERSION"},
				Pusher:       "release-bot",
				Sender:       "gitlab",
				Receiver:     "gl",
				DeliveryID:   gitlabIdempotencyKey,
			}},
		},
		{
			name: "system hook push (event_name only)",
			d:    gitlabDelivery("System Hook", fixture(t, "gitlab", "system_hook_push.json")),
			want: []events.GitPushed{{
				RepoURL:      "https://gitlab.example.com/shop/deployments.git",
				Ref:          "refs/heads/main",
				Branch:       "main",
				Before:       "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
				After:        "e3f1a2b4c5d6e7f8091a2b3c4d5e6f708192a3b4",
				ChangedPaths: []string{"apps/api/values.yaml"},
				Pusher:       "jdev",
				Sender:       "gitlab",
				Receiver:     "gl",
				DeliveryID:   gitlabIdempotencyKey,
			}},
		},
		{
			name: "repository URL from web_url",
			d:    gitlabDelivery("Push Hook", []byte(`{"object_kind":"push","ref":"refs/heads/main","after":"1111111111111111111111111111111111111111","checkout_sha":"1111111111111111111111111111111111111111","user_name":"Jordan Dev","project":{"web_url":"https://gitlab.example.com/shop/app"},"total_commits_count":"0"}`)),
			want: []events.GitPushed{{
				RepoURL:    "https://gitlab.example.com/shop/app.git",
				Ref:        "refs/heads/main",
				Branch:     "main",
				After:      "1111111111111111111111111111111111111111",
				Pusher:     "Jordan Dev",
				Sender:     "gitlab",
				Receiver:   "gl",
				DeliveryID: gitlabIdempotencyKey,
			}},
		},
		{
			name: "count as a float",
			d:    gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/x","after":"2222222222222222222222222222222222222222","project":{"git_http_url":"https://g/x.git"},"commits":[{"added":["a"]}],"total_commits_count":1.0}`)),
			want: []events.GitPushed{{
				RepoURL: "https://g/x.git", Ref: "refs/heads/x", Branch: "x",
				After: "2222222222222222222222222222222222222222", ChangedPaths: []string{"a"},
				Sender: "gitlab", Receiver: "gl", DeliveryID: gitlabIdempotencyKey,
			}},
		},
		{
			name:        "branch delete",
			d:           gitlabDelivery("Push Hook", fixture(t, "gitlab", "branch_delete.json")),
			wantIgnored: "branch delete refs/heads/feature/old-canary",
		},
		{
			name:        "tag delete",
			d:           gitlabDelivery("Tag Push Hook", fixture(t, "gitlab", "tag_delete.json")),
			wantIgnored: "tag delete refs/tags/v1.4.1-rc.1",
		},
		{
			name:        "delete without after, checkout_sha null",
			d:           gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/x","checkout_sha":null,"project":{"git_http_url":"https://g/x.git"}}`)),
			wantIgnored: "branch delete refs/heads/x",
		},
		{
			name:        "merge request",
			d:           gitlabDelivery("Merge Request Hook", fixture(t, "gitlab", "merge_request.json")),
			wantIgnored: "pull request #42 of branch feature/canary: not flotilla's",
		},
		{
			name:        "other system hook",
			d:           gitlabDelivery("System Hook", fixture(t, "gitlab", "system_hook_repository_update.json")),
			wantIgnored: `system hook "repository_update"`,
		},
		{name: "missing event header", d: gitlabDelivery("", push), wantErr: errAny},
		{name: "not JSON", d: gitlabDelivery("Push Hook", []byte(`{"ref":`)), wantErr: errAny},
		{name: "no ref", d: gitlabDelivery("Push Hook", []byte(`{"project":{"git_http_url":"https://g/x.git"}}`)), wantErr: errAny},
		{name: "no project", d: gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/main"}`)), wantErr: errAny},
		{name: "count not a number", d: gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/main","project":{"git_http_url":"https://g/x.git"},"total_commits_count":"many"}`)), wantErr: errAny},
		{name: "count with a fraction", d: gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/main","project":{"git_http_url":"https://g/x.git"},"total_commits_count":1.5}`)), wantErr: errAny},
		{name: "path not a string", d: gitlabDelivery("Push Hook", []byte(`{"ref":"refs/heads/main","project":{"git_http_url":"https://g/x.git"},"commits":[{"added":[1]}]}`)), wantErr: errAny},
		{name: "form-encoded", d: gitWithHeaders(gitlabDelivery("Push Hook", push), "Content-Type", "application/x-www-form-urlencoded"), wantErr: ErrUnsupportedMediaType},
		{name: "unparsable content type", d: gitWithHeaders(gitlabDelivery("Push Hook", push), "Content-Type", "application/json; =x"), wantErr: ErrUnsupportedMediaType},
	}
	runGitParseCases(t, GitLabSender{}.Parse, gitlabIdempotencyKey, func(gitParseCase, events.GitPushed) string {
		return "gl/gitlab/" + gitlabIdempotencyKey
	}, tests)
}

// A resent delivery keeps its Idempotency-Key but has fresh UUIDs: it must
// yield the same event id.
func TestGitLabReplay(t *testing.T) {
	push := fixture(t, "gitlab", "push.json")
	resent := gitWithHeaders(gitlabDelivery("Push Hook", push),
		"X-Gitlab-Event-UUID", "11111111-2222-4333-8444-555555555555",
		"X-Gitlab-Webhook-UUID", "66666666-7777-4888-9999-000000000000")
	first := checkReplay(t, GitLabSender{}.Parse, gitlabDelivery("Push Hook", push), resent, 1)
	other, err := GitLabSender{}.Parse(gitWithHeaders(gitlabDelivery("Push Hook", push), "Idempotency-Key", "another-key"))
	if err != nil {
		t.Fatal(err)
	}
	if gitEventIDs(other)[0] == first[0] {
		t.Error("another delivery got the same event id")
	}
}

// checkReplay parses a delivery and its redelivery: both must yield the same
// want distinct event ids, which it returns.
func checkReplay(t *testing.T, parse func(*Delivery) (Result, error), first, again *Delivery, want int) []string {
	t.Helper()
	ids := make([][]string, 2)
	for i, d := range []*Delivery{first, again} {
		res, err := parse(d)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = gitEventIDs(res)
	}
	if diff := cmp.Diff(ids[0], ids[1]); diff != "" {
		t.Errorf("replayed ids (-first +again):\n%s", diff)
	}
	if len(ids[0]) != want || len(slices.Compact(slices.Sorted(slices.Values(ids[0])))) != want {
		t.Errorf("ids %q are not %d distinct ids", ids[0], want)
	}
	return ids[0]
}

// gitEventIDs lists the ids of a result's events.
func gitEventIDs(res Result) []string {
	ids := make([]string, 0, len(res.Events))
	for _, e := range res.Events {
		ids = append(ids, e.ID())
	}
	return ids
}

func TestGitLabAuthenticate(t *testing.T) {
	push := fixture(t, "gitlab", "push.json")
	basic := base64.StdEncoding.EncodeToString([]byte(gitlabToken))
	tests := []struct {
		name   string
		token  string // "" leaves the header out
		wantOK bool
	}{
		{"right token", gitlabToken, true},
		{"bearer token", "Bearer " + gitlabToken, true},
		{"basic credentials", "Basic " + basic, true},
		{"wrong token", "gl-hook-guess", false},
		{"token prefix", gitlabToken[:5], false},
		{"token with a suffix", gitlabToken + "x", false},
		{"missing header", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := gitWithHeaders(gitlabDelivery("Push Hook", push), "X-Gitlab-Token", tt.token)
			checkAuth(t, GitLabSender{Secret: gitlabToken}, d, tt.wantOK)
		})
	}
	t.Run("empty secret never matches", func(t *testing.T) {
		d := gitWithHeaders(gitlabDelivery("Push Hook", push), "X-Gitlab-Token", "")
		d.Header["X-Gitlab-Token"] = []string{""}
		checkAuth(t, GitLabSender{Secret: ""}, d, false)
		checkAuth(t, GitLabSender{Secret: ""}, gitlabDelivery("Push Hook", push), false)
	})
}

func TestNewGitLabSender(t *testing.T) {
	s, err := newGitLabSender(ReceiverConfig{Name: "gl", Type: SenderGitLab, Secret: "x"})
	if err != nil || s != (GitLabSender{Secret: "x"}) {
		t.Errorf("newGitLabSender = %#v, %v", s, err)
	}
}

func FuzzGitLabParse(f *testing.F) {
	seedFixtures(f, "gitlab")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, event := range []string{"Push Hook", "Tag Push Hook", "System Hook"} {
			res, err := GitLabSender{}.Parse(gitlabDelivery(event, body))
			checkFuzzResult(t, res, err)
		}
	})
}
