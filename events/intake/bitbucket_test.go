package intake

import (
	"testing"

	"github.com/flotilla-cd/flotilla/events"
)

const (
	bitbucketRequestUUID = "7f3d1c2b-5a6e-4f80-9b1c-2d3e4f5a6b7c"
	bitbucketHookUUID    = "{cb5a9f04-1d2b-4a6c-8e0f-3b7d9c1e5a42}"
	bitbucketSecret      = "bb-s3cret"
)

func bitbucketDelivery(event string, body []byte) *Delivery {
	return &Delivery{
		Receiver: "bb",
		Header: header(
			"Content-Type", "application/json",
			"User-Agent", "Bitbucket-Webhooks/2.0",
			"X-Event-Key", event,
			"X-Hook-UUID", bitbucketHookUUID,
			"X-Request-UUID", bitbucketRequestUUID,
			"X-Attempt-Number", "1",
		),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestBitbucketParse(t *testing.T) {
	push := fixture(t, "bitbucket", "push.json")
	wantPush := events.GitPushed{
		RepoURL:    "https://bitbucket.org/shop/deployments.git",
		Ref:        "refs/heads/main",
		Branch:     "main",
		Before:     "1e65c05c1d5171631d92438a13901ca7dae9618c",
		After:      "709d658dc5b6d6afcd46049c2f332ee3f515a67d",
		Pusher:     "emma",
		Sender:     "bitbucket",
		Receiver:   "bb",
		DeliveryID: bitbucketRequestUUID,
	}
	multi := []events.GitPushed{
		{
			RepoURL:    "https://bitbucket.org/shop/deployments.git",
			Ref:        "refs/tags/v1.4.2",
			Tag:        "v1.4.2",
			After:      "5b7d1e8a9c3f2a4b6d8e0f1a3c5e7a9b1d3f5a7c",
			Pusher:     "emma",
			Sender:     "bitbucket",
			Receiver:   "bb",
			DeliveryID: bitbucketRequestUUID,
		},
		{
			RepoURL:    "https://bitbucket.org/shop/deployments.git",
			Ref:        "refs/heads/release/1.4",
			Branch:     "release/1.4",
			After:      "9a8b7c6d5e4f30211203f4e5d6c7b8a990817263",
			Pusher:     "emma",
			Sender:     "bitbucket",
			Receiver:   "bb",
			DeliveryID: bitbucketRequestUUID,
		},
	}
	noDelivery := wantPush
	noDelivery.DeliveryID = ""
	tests := []gitParseCase{
		{name: "push", d: bitbucketDelivery("repo:push", push), want: []events.GitPushed{wantPush}},
		{name: "push without content type", d: gitWithHeaders(bitbucketDelivery("repo:push", push), "Content-Type", ""), want: []events.GitPushed{wantPush}},
		{name: "tag, deleted branch and new branch", d: bitbucketDelivery("repo:push", fixture(t, "bitbucket", "push_multi.json")), want: multi},
		{
			name:    "no X-Request-UUID: the body, not X-Hook-UUID",
			d:       gitWithHeaders(bitbucketDelivery("repo:push", push), "X-Request-UUID", ""),
			want:    []events.GitPushed{noDelivery},
			wantKey: bodyKey(&Delivery{Body: push}),
		},
		{
			name: "display name and html link",
			d:    bitbucketDelivery("repo:push", []byte(`{"actor":{"display_name":"Emma Ops"},"repository":{"links":{"html":{"href":"https://bitbucket.org/shop/app"}}},"push":{"changes":[{"old":null,"new":{"type":"annotated_tag","name":"v2","target":{"hash":"3333333333333333333333333333333333333333"}}}]}}`)),
			want: []events.GitPushed{{
				RepoURL: "https://bitbucket.org/shop/app.git", Ref: "refs/tags/v2", Tag: "v2",
				After: "3333333333333333333333333333333333333333", Pusher: "Emma Ops",
				Sender: "bitbucket", Receiver: "bb", DeliveryID: bitbucketRequestUUID,
			}},
		},
		{name: "branch delete", d: bitbucketDelivery("repo:push", fixture(t, "bitbucket", "branch_delete.json")), wantIgnored: "branch delete refs/heads/feature/old-canary"},
		{
			name:        "several deletes",
			d:           bitbucketDelivery("repo:push", []byte(`{"repository":{"full_name":"shop/app"},"push":{"changes":[{"old":{"type":"branch","name":"a"},"new":null},{"old":{"type":"tag","name":"b"},"new":null},{"old":{"type":"bookmark","name":"c"},"new":null},{"old":null,"new":{"type":"bookmark","name":"d"}},{"old":null,"new":null}]}}`)),
			wantIgnored: `branch delete refs/heads/a, tag delete refs/tags/b, delete of bookmark "c" and 2 more ref changes`,
		},
		{name: "no changes", d: bitbucketDelivery("repo:push", []byte(`{"repository":{"full_name":"shop/app"},"push":{"changes":[]}}`)), wantIgnored: "push with no ref changes"},
		{name: "pull request", d: bitbucketDelivery("pullrequest:created", fixture(t, "bitbucket", "pullrequest_created.json")), wantIgnored: `event "pullrequest:created"`},
		{name: "diagnostics ping", d: bitbucketDelivery("diagnostics:ping", []byte(`{"test":true}`)), wantIgnored: "ping"},
		{name: "missing event header", d: bitbucketDelivery("", push), wantErr: errAny},
		{name: "not JSON", d: bitbucketDelivery("repo:push", []byte(`{"push":`)), wantErr: errAny},
		{name: "no repository", d: bitbucketDelivery("repo:push", []byte(`{"push":{"changes":[]}}`)), wantErr: errAny},
		{name: "new ref without name", d: bitbucketDelivery("repo:push", []byte(`{"repository":{"full_name":"shop/app"},"push":{"changes":[{"new":{"type":"branch","target":{"hash":"1"}}}]}}`)), wantErr: errAny},
		{name: "changes not a list", d: bitbucketDelivery("repo:push", []byte(`{"repository":{"full_name":"shop/app"},"push":{"changes":{}}}`)), wantErr: errAny},
		{name: "form-encoded", d: gitWithHeaders(bitbucketDelivery("repo:push", push), "Content-Type", "application/x-www-form-urlencoded"), wantErr: ErrUnsupportedMediaType},
	}
	runGitParseCases(t, BitbucketSender{}.Parse, bitbucketRequestUUID, func(tt gitParseCase, p events.GitPushed) string {
		key := tt.wantKey
		if key == "" {
			key = bitbucketRequestUUID
		}
		return "bb/bitbucket/" + key + "/" + p.Ref
	}, tests)
}

// A retried delivery (X-Attempt-Number 2) keeps its X-Request-UUID and
// yields the same ids; the pushes of one delivery get distinct ids.
func TestBitbucketReplay(t *testing.T) {
	body := fixture(t, "bitbucket", "push_multi.json")
	checkReplay(t, BitbucketSender{}.Parse, bitbucketDelivery("repo:push", body),
		gitWithHeaders(bitbucketDelivery("repo:push", body), "X-Attempt-Number", "2"), 2)
}

func TestBitbucketAuthenticate(t *testing.T) {
	push := fixture(t, "bitbucket", "push.json")
	modified := append([]byte(nil), push...)
	modified[len(modified)-2] = ' '
	tests := []struct {
		name      string
		body      []byte
		signature string // "" leaves the header out
		wantOK    bool
	}{
		{"right secret", push, githubSign(bitbucketSecret, push), true},
		{"wrong secret", push, githubSign("guess", push), false},
		{"missing header", push, "", false},
		{"signature over a modified body", modified, githubSign(bitbucketSecret, push), false},
		{"without prefix", push, githubSign(bitbucketSecret, push)[len("sha256="):], false},
		{"sha1 prefix", push, "sha1=" + githubSign(bitbucketSecret, push)[len("sha256="):], false},
		{"not hex", push, "sha256=zz", false},
		{"truncated", push, githubSign(bitbucketSecret, push)[:20], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := bitbucketDelivery("repo:push", tt.body)
			if tt.signature != "" {
				d.Header.Set("X-Hub-Signature", tt.signature)
			}
			checkAuth(t, BitbucketSender{Secret: bitbucketSecret}, d, tt.wantOK)
		})
	}
	t.Run("X-Hub-Signature-256 is not Bitbucket's header", func(t *testing.T) {
		d := bitbucketDelivery("repo:push", push)
		d.Header.Set("X-Hub-Signature-256", githubSign(bitbucketSecret, push))
		checkAuth(t, BitbucketSender{Secret: bitbucketSecret}, d, false)
	})
	t.Run("empty secret never matches", func(t *testing.T) {
		d := bitbucketDelivery("repo:push", push)
		d.Header.Set("X-Hub-Signature", githubSign("", push))
		checkAuth(t, BitbucketSender{Secret: ""}, d, false)
	})
}

func TestNewBitbucketSender(t *testing.T) {
	s, err := newBitbucketSender(ReceiverConfig{Name: "bb", Type: SenderBitbucket, Secret: "x"})
	if err != nil || s != (BitbucketSender{Secret: "x"}) {
		t.Errorf("newBitbucketSender = %#v, %v", s, err)
	}
}

func FuzzBitbucketParse(f *testing.F) {
	seedFixtures(f, "bitbucket")
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := BitbucketSender{}.Parse(bitbucketDelivery("repo:push", body))
		checkFuzzResult(t, res, err)
	})
}
