package intake

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/flotilla-cd/flotilla/events"
)

// GitHubSender reads GitHub "push" webhooks (and answers "ping"). Each push
// of a ref becomes a [TypeGitPushed]; a deleted ref is ignored. "package" and
// "registry_package" events (GitHub Packages / GHCR) become
// [TypeImagePushed]s: see ghcr.go.
//
// Authentication: X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256 of
// the raw body keyed with the secret.
type GitHubSender struct {
	// Secret is the receiver's secret.
	Secret string
}

const githubSignaturePrefix = "sha256="

type githubPush struct {
	Ref        string           `json:"ref"`
	Before     string           `json:"before"`
	After      string           `json:"after"`
	Deleted    bool             `json:"deleted"`
	Commits    []gitCommitFiles `json:"commits"`
	Repository struct {
		FullName string `json:"full_name"`
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Pusher struct {
		Name string `json:"name"`
	} `json:"pusher"`
}

// Authenticate implements [Sender].
func (s GitHubSender) Authenticate(_ context.Context, d *Delivery) error {
	secret := s.Secret
	return checkHMAC(d, sha256.New, secret, "X-Hub-Signature-256", d.Header.Get("X-Hub-Signature-256"), githubSignaturePrefix)
}

// Parse implements [Sender].
func (GitHubSender) Parse(d *Delivery) (Result, error) {
	event := d.Header.Get("X-GitHub-Event")
	delivery := d.Header.Get("X-GitHub-Delivery")
	if event == "" {
		return Result{}, malformed("missing X-GitHub-Event header")
	}
	if delivery == "" {
		return Result{}, malformed("missing X-GitHub-Delivery header")
	}
	res := Result{DeliveryID: delivery}
	switch event {
	case "push":
	case "package", "registry_package":
		return parseGitHubPackage(d, event, delivery)
	case "ping":
		res.Ignored = "ping"
		return res, nil
	default:
		// A hook subscribed to more than pushes: nothing for us, and not
		// the sender's fault.
		res.Ignored = fmt.Sprintf("event %q", event)
		return res, nil
	}

	body, err := jsonOrFormPayload(d, "GitHub")
	if err != nil {
		return Result{}, err
	}
	var push githubPush
	if err := json.Unmarshal(body, &push); err != nil {
		return Result{}, malformed("decoding GitHub push: %w", err)
	}
	if push.Ref == "" {
		return Result{}, malformed("GitHub push has no ref")
	}
	p := events.GitPushed{
		RepoURL:    push.Repository.CloneURL,
		Ref:        push.Ref,
		Before:     push.Before,
		After:      push.After,
		Pusher:     push.Pusher.Name,
		Sender:     SenderGitHub,
		Receiver:   d.Receiver,
		DeliveryID: delivery,
	}
	if p.RepoURL == "" && push.Repository.HTMLURL != "" {
		p.RepoURL = push.Repository.HTMLURL + ".git"
	}
	if p.RepoURL == "" {
		return Result{}, malformed("GitHub push has no repository.clone_url")
	}
	// GitHub lists the push's commits (up to 20) with no total to compare.
	return gitPushResult(d, res, delivery, p, push.Deleted, push.Commits, true)
}
