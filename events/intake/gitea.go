package intake

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/flotilla-cd/flotilla/events"
)

// Sender types of Gitea and of its fork Forgejo, which speak the same
// webhooks.
const (
	SenderGitea   = "gitea"
	SenderForgejo = "forgejo"
)

// GiteaSender reads Gitea and Forgejo "push" and "pull_request" webhooks.
// Each push of a ref becomes a [TypeGitPushed]; a pull request of one of
// flotilla's branches opened, closed (merged or not) or reopened becomes a
// [TypeGitPullRequest]; a deleted ref, other pull requests and actions, and
// every other event (create, delete, ...), are ignored. Gitea reports a deleted branch or
// tag as a "delete" event, not as a push.
//
// Authentication: X-Gitea-Signature (and Forgejo's X-Forgejo-Signature) is
// the bare hex HMAC-SHA256 of the payload keyed with the secret, mirrored as
// X-Hub-Signature-256 "sha256=<hex>". Any one of them authenticates; each
// one present must be right. Gitea signs the JSON payload itself, so for a
// form-encoded delivery the signature covers the "payload" field, not the
// raw body.
//
// Changed paths: Gitea lists at most FEED_MAX_COMMIT_NUM commits of a push
// (app.ini section ui, 5 by default) and says in total_commits how many there
// were. When it left commits out, ChangedPaths is left empty rather than
// partial. Gitea releases before total_commits cannot tell, and their paths
// may be partial.
type GiteaSender struct {
	// Secret is the receiver's secret.
	Secret string
	// Type is the receiver's sender type, [SenderGitea] or [SenderForgejo]:
	// it names the sender in the events. Empty means [SenderGitea].
	Type string
}

// newGiteaSender builds the sender of a "gitea" or "forgejo" receiver.
func newGiteaSender(rc ReceiverConfig) (Sender, error) {
	typ := SenderGitea
	if rc.Type == SenderForgejo {
		typ = SenderForgejo
	}
	return GiteaSender{Secret: rc.Secret, Type: typ}, nil
}

// giteaSignatures are the headers that carry a Gitea or Forgejo signature,
// and the prefix of each.
var giteaSignatures = []struct{ header, prefix string }{
	{"X-Gitea-Signature", ""},
	{"X-Forgejo-Signature", ""},
	{"X-Hub-Signature-256", "sha256="},
}

type giteaPush struct {
	Ref          string           `json:"ref"`
	Before       string           `json:"before"`
	After        string           `json:"after"`
	Commits      []gitCommitFiles `json:"commits"`
	TotalCommits gitCount         `json:"total_commits"`
	Repository   struct {
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Pusher struct {
		Login    string `json:"login"`
		Username string `json:"username"`
	} `json:"pusher"`
}

// Authenticate implements [Sender].
func (s GiteaSender) Authenticate(_ context.Context, d *Delivery) error {
	secret := s.Secret
	if secret == "" {
		return unauthenticated("no secret configured")
	}
	payload, ok := giteaSignedBytes(d)
	if !ok {
		return unauthenticated("form-encoded delivery has no payload field to check the signature of")
	}
	signed := &Delivery{Body: payload}
	present := 0
	for _, sig := range giteaSignatures {
		v := d.Header.Get(sig.header)
		if v == "" {
			continue
		}
		present++
		if err := checkHMAC(signed, sha256.New, secret, sig.header, v, sig.prefix); err != nil {
			return err
		}
	}
	if present == 0 {
		return unauthenticated("missing X-Gitea-Signature, X-Forgejo-Signature or X-Hub-Signature-256 header")
	}
	return nil
}

// giteaSignedBytes returns what Gitea signed: the "payload" field of a
// form-encoded body, else the body. It is false for a form without a
// payload.
func giteaSignedBytes(d *Delivery) ([]byte, bool) {
	if mt, err := mediaType(d); err != nil || mt != "application/x-www-form-urlencoded" {
		return d.Body, true
	}
	form, err := url.ParseQuery(string(d.Body))
	if err != nil || !form.Has("payload") {
		return nil, false
	}
	return []byte(form.Get("payload")), true
}

// sender is the sender type the events name.
func (s GiteaSender) sender() string {
	if s.Type == "" {
		return SenderGitea
	}
	return s.Type
}

// Parse implements [Sender].
func (s GiteaSender) Parse(d *Delivery) (Result, error) {
	event := gitFirstHeader(d, "X-Forgejo-Event", "X-Gitea-Event", "X-GitHub-Event")
	if event == "" {
		return Result{}, malformed("missing X-Gitea-Event or X-Forgejo-Event header")
	}
	delivery := gitFirstHeader(d, "X-Forgejo-Delivery", "X-Gitea-Delivery", "X-GitHub-Delivery")
	key := delivery
	if key == "" {
		key = bodyKey(d)
	}
	res := Result{DeliveryID: delivery}
	if event != "push" && event != "pull_request" {
		res.Ignored = fmt.Sprintf("event %q", event)
		return res, nil
	}
	body, err := jsonOrFormPayload(d, "Gitea")
	if err != nil {
		return Result{}, err
	}
	if event == "pull_request" {
		return s.pullRequest(d, res, key, delivery, body)
	}
	var push giteaPush
	if err := json.Unmarshal(body, &push); err != nil {
		return Result{}, malformed("decoding Gitea push: %w", err)
	}
	p, err := s.pushed(push, d, delivery)
	if err != nil {
		return Result{}, err
	}
	return gitPushResult(d, res, key, p, gitNullSHA(push.After), push.Commits, int(push.TotalCommits) <= len(push.Commits))
}

// pushed fills the payload fields Gitea gives, except the changed paths.
func (s GiteaSender) pushed(push giteaPush, d *Delivery, delivery string) (events.GitPushed, error) {
	if push.Ref == "" {
		return events.GitPushed{}, malformed("Gitea push has no ref")
	}
	p := events.GitPushed{
		RepoURL:    push.Repository.CloneURL,
		Ref:        push.Ref,
		Before:     push.Before,
		After:      push.After,
		Pusher:     push.Pusher.Login,
		Sender:     s.sender(),
		Receiver:   d.Receiver,
		DeliveryID: delivery,
	}
	if p.RepoURL == "" && push.Repository.HTMLURL != "" {
		p.RepoURL = push.Repository.HTMLURL + ".git"
	}
	if p.RepoURL == "" {
		return events.GitPushed{}, malformed("Gitea push has no repository.clone_url")
	}
	if p.Pusher == "" {
		p.Pusher = push.Pusher.Username
	}
	return p, nil
}

// pullRequest reads a "pull_request" delivery: Gitea's payload is GitHub's.
func (s GiteaSender) pullRequest(d *Delivery, res Result, key, delivery string, body []byte) (Result, error) {
	return gitHubStylePullRequest(d, res, key, delivery, body, s.sender())
}
