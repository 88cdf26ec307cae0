package intake

import (
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/events"
)

const (
	bitbucketServerRequestID = "c8f0e3a2-7b41-4d9e-b5c6-1a2b3c4d5e6f"
	bitbucketServerSecret    = "bbs-s3cret"
)

// bitbucketServerAt is the date of the refs_changed fixtures.
var bitbucketServerAt = time.Date(2026, 1, 2, 14, 4, 5, 0, time.UTC)

func bitbucketServerDelivery(event string, body []byte) *Delivery {
	return &Delivery{
		Receiver: "bbs",
		Header: header(
			"Content-Type", "application/json; charset=utf-8",
			"User-Agent", "Atlassian HttpClient 4.2.0 / Bitbucket-9.4.2 (9004002) / Default",
			"X-Event-Key", event,
			"X-Request-Id", bitbucketServerRequestID,
		),
		Body:       body,
		ReceivedAt: received,
	}
}

func TestBitbucketServerParse(t *testing.T) {
	push := fixture(t, "bitbucket-server", "refs_changed.json")
	wantPush := events.GitPushed{
		RepoURL:    "https://bitbucket.example.com/scm/ops/deployments.git",
		Ref:        "refs/heads/main",
		Branch:     "main",
		Before:     "6113728f27ae82c7b1a177c8d03f9e96e0adf246",
		After:      "0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c",
		Pusher:     "jdoe",
		Sender:     "bitbucket-server",
		Receiver:   "bbs",
		DeliveryID: bitbucketServerRequestID,
	}
	multi := []events.GitPushed{
		{
			RepoURL:    "https://bitbucket.example.com/scm/ops/deployments.git",
			Ref:        "refs/tags/v1.4.2",
			Tag:        "v1.4.2",
			Before:     "0000000000000000000000000000000000000000",
			After:      "5b7d1e8a9c3f2a4b6d8e0f1a3c5e7a9b1d3f5a7c",
			Pusher:     "jdoe",
			Sender:     "bitbucket-server",
			Receiver:   "bbs",
			DeliveryID: bitbucketServerRequestID,
		},
		{
			RepoURL:    "https://bitbucket.example.com/scm/ops/deployments.git",
			Ref:        "refs/heads/release/1.4",
			Branch:     "release/1.4",
			Before:     "0000000000000000000000000000000000000000",
			After:      "9a8b7c6d5e4f30211203f4e5d6c7b8a990817263",
			Pusher:     "jdoe",
			Sender:     "bitbucket-server",
			Receiver:   "bbs",
			DeliveryID: bitbucketServerRequestID,
		},
	}
	noDelivery := wantPush
	noDelivery.DeliveryID = ""
	tests := []gitParseCase{
		{name: "push", d: bitbucketServerDelivery("repo:refs_changed", push), want: []events.GitPushed{wantPush}, wantTime: bitbucketServerAt},
		{
			name:     "tag, deleted branch and new branch",
			d:        bitbucketServerDelivery("repo:refs_changed", fixture(t, "bitbucket-server", "refs_changed_multi.json")),
			want:     multi,
			wantTime: bitbucketServerAt,
		},
		{
			name:     "no X-Request-Id",
			d:        gitWithHeaders(bitbucketServerDelivery("repo:refs_changed", push), "X-Request-Id", ""),
			want:     []events.GitPushed{noDelivery},
			wantKey:  bodyKey(&Delivery{Body: push}),
			wantTime: bitbucketServerAt,
		},
		{
			name: "user info stripped from the http link, refId, slug, no date",
			d:    bitbucketServerDelivery("repo:refs_changed", []byte(`{"actor":{"slug":"jdoe"},"repository":{"links":{"clone":[{"href":"ssh://git@bb:7999/ops/app.git","name":"ssh"},{"href":"http://jdoe@bb:7990/scm/ops/app.git","name":"http"}]}},"changes":[{"refId":"refs/heads/main","fromHash":"1111111111111111111111111111111111111111","toHash":"2222222222222222222222222222222222222222","type":"UPDATE"}]}`)),
			want: []events.GitPushed{{
				RepoURL: "http://bb:7990/scm/ops/app.git", Ref: "refs/heads/main", Branch: "main",
				Before: "1111111111111111111111111111111111111111", After: "2222222222222222222222222222222222222222",
				Pusher: "jdoe", Sender: "bitbucket-server", Receiver: "bbs", DeliveryID: bitbucketServerRequestID,
			}},
			wantTime: received,
		},
		{
			name: "ssh link when there is no http one",
			d:    bitbucketServerDelivery("repo:refs_changed", []byte(`{"date":"2026-01-02T14:04:05Z","actor":{"name":"jdoe"},"repository":{"links":{"clone":[{"href":"ssh://git@bb:7999/ops/app.git","name":"ssh"}]}},"changes":[{"ref":{"id":"refs/tags/v2","type":"TAG"},"toHash":"3333333333333333333333333333333333333333","type":"ADD"}]}`)),
			want: []events.GitPushed{{
				RepoURL: "ssh://git@bb:7999/ops/app.git", Ref: "refs/tags/v2", Tag: "v2",
				After: "3333333333333333333333333333333333333333", Pusher: "jdoe",
				Sender: "bitbucket-server", Receiver: "bbs", DeliveryID: bitbucketServerRequestID,
			}},
			wantTime: bitbucketServerAt,
		},
		{name: "branch delete", d: bitbucketServerDelivery("repo:refs_changed", fixture(t, "bitbucket-server", "refs_changed_delete.json")), wantIgnored: "branch delete refs/heads/feature/old-canary"},
		{name: "no changes", d: bitbucketServerDelivery("repo:refs_changed", []byte(`{"repository":{"links":{"clone":[{"href":"ssh://git@bb/x.git","name":"ssh"}]}},"changes":[]}`)), wantIgnored: "push with no ref changes"},
		{name: "ping", d: bitbucketServerDelivery("diagnostics:ping", fixture(t, "bitbucket-server", "ping.json")), wantIgnored: "ping"},
		{name: "pull request", d: bitbucketServerDelivery("pr:opened", fixture(t, "bitbucket-server", "pr_opened.json")), wantIgnored: `event "pr:opened"`},
		{name: "mirror synchronized", d: bitbucketServerDelivery("mirror:repo_synchronized", []byte(`{}`)), wantIgnored: `event "mirror:repo_synchronized"`},
		{name: "missing event header", d: bitbucketServerDelivery("", push), wantErr: errAny},
		{name: "not JSON", d: bitbucketServerDelivery("repo:refs_changed", []byte(`{"changes":`)), wantErr: errAny},
		{name: "no clone links", d: bitbucketServerDelivery("repo:refs_changed", []byte(`{"repository":{"links":{"clone":[{"href":"x","name":"git"}]}},"changes":[]}`)), wantErr: errAny},
		{name: "change without ref", d: bitbucketServerDelivery("repo:refs_changed", []byte(`{"repository":{"links":{"clone":[{"href":"ssh://git@bb/x.git","name":"ssh"}]}},"changes":[{"toHash":"1"}]}`)), wantErr: errAny},
		{name: "text/plain", d: gitWithHeaders(bitbucketServerDelivery("repo:refs_changed", push), "Content-Type", "text/plain"), wantErr: ErrUnsupportedMediaType},
	}
	runGitParseCases(t, BitbucketServerSender{}.Parse, bitbucketServerRequestID, func(tt gitParseCase, p events.GitPushed) string {
		key := tt.wantKey
		if key == "" {
			key = bitbucketServerRequestID
		}
		return "bbs/bitbucket-server/" + key + "/" + p.Ref
	}, tests)
}

func TestBitbucketServerReplay(t *testing.T) {
	body := fixture(t, "bitbucket-server", "refs_changed_multi.json")
	checkReplay(t, BitbucketServerSender{}.Parse, bitbucketServerDelivery("repo:refs_changed", body),
		bitbucketServerDelivery("repo:refs_changed", body), 2)
}

func TestBitbucketServerAuthenticate(t *testing.T) {
	push := fixture(t, "bitbucket-server", "refs_changed.json")
	ping := fixture(t, "bitbucket-server", "ping.json")
	modified := append([]byte(nil), push...)
	modified[len(modified)-2] = ' '
	tests := []struct {
		name      string
		body      []byte
		signature string // "" leaves the header out
		wantOK    bool
	}{
		{"right secret", push, githubSign(bitbucketServerSecret, push), true},
		{"ping, right secret", ping, githubSign(bitbucketServerSecret, ping), true},
		{"wrong secret", push, githubSign("guess", push), false},
		{"missing header", push, "", false},
		{"signature over a modified body", modified, githubSign(bitbucketServerSecret, push), false},
		{"signature of another delivery", push, githubSign(bitbucketServerSecret, ping), false},
		{"without prefix", push, githubSign(bitbucketServerSecret, push)[len("sha256="):], false},
		{"not hex", push, "sha256=not-hex", false},
		{"truncated", push, githubSign(bitbucketServerSecret, push)[:30], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := bitbucketServerDelivery("repo:refs_changed", tt.body)
			if tt.signature != "" {
				d.Header.Set("X-Hub-Signature", tt.signature)
			}
			checkAuth(t, BitbucketServerSender{Secret: bitbucketServerSecret}, d, tt.wantOK)
		})
	}
	t.Run("empty secret never matches", func(t *testing.T) {
		d := bitbucketServerDelivery("repo:refs_changed", push)
		d.Header.Set("X-Hub-Signature", githubSign("", push))
		checkAuth(t, BitbucketServerSender{Secret: ""}, d, false)
	})
}

func TestNewBitbucketServerSender(t *testing.T) {
	s, err := newBitbucketServerSender(ReceiverConfig{Name: "bbs", Type: SenderBitbucketServer, Secret: "x"})
	if err != nil || s != (BitbucketServerSender{Secret: "x"}) {
		t.Errorf("newBitbucketServerSender = %#v, %v", s, err)
	}
}

func FuzzBitbucketServerParse(f *testing.F) {
	seedFixtures(f, "bitbucket-server")
	f.Fuzz(func(t *testing.T, body []byte) {
		res, err := BitbucketServerSender{}.Parse(bitbucketServerDelivery("repo:refs_changed", body))
		checkFuzzResult(t, res, err)
	})
}
