package intake

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/flotilla-cd/flotilla/events"
)

// GitHubSender reads GitHub "push" and "pull_request" webhooks (and answers
// "ping"). Each push of a ref becomes a [TypeGitPushed]; a deleted ref is
// ignored. A pull request of one of flotilla's branches opened, closed
// (merged or not) or reopened becomes a [TypeGitPullRequest]. "package" and
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
	case "pull_request":
		return parseGitHubPullRequest(d, res, delivery)
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

// githubPullRequest is a "pull_request" payload as GitHub sends it, and
// Gitea and Forgejo after it.
type githubPullRequest struct {
	Action      string `json:"action"`
	Number      int64  `json:"number"`
	PullRequest struct {
		Number         int64  `json:"number"`
		HTMLURL        string `json:"html_url"`
		Merged         bool   `json:"merged"`
		MergeCommitSHA string `json:"merge_commit_sha"`
		Head           struct {
			Ref string `json:"ref"`
			SHA string `json:"sha"`
		} `json:"head"`
		Base struct {
			Ref string `json:"ref"`
		} `json:"base"`
		MergedBy struct {
			Login string `json:"login"`
		} `json:"merged_by"`
	} `json:"pull_request"`
	Repository struct {
		CloneURL string `json:"clone_url"`
		HTMLURL  string `json:"html_url"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
	} `json:"sender"`
}

// parseGitHubPullRequest reads a "pull_request" delivery.
func parseGitHubPullRequest(d *Delivery, res Result, delivery string) (Result, error) {
	body, err := jsonOrFormPayload(d, "GitHub")
	if err != nil {
		return Result{}, err
	}
	return gitHubStylePullRequest(d, res, delivery, delivery, body, SenderGitHub)
}

// gitHubStylePullRequest reads a GitHub-shaped "pull_request" payload (GitHub,
// Gitea, Forgejo) for sender.
func gitHubStylePullRequest(d *Delivery, res Result, key, delivery string, body []byte, sender string) (Result, error) {
	var pr githubPullRequest
	if err := json.Unmarshal(body, &pr); err != nil {
		return Result{}, malformed("decoding %s pull request: %w", sender, err)
	}
	p := events.GitPullRequest{
		RepoURL: pr.Repository.CloneURL, Number: pr.Number, URL: pr.PullRequest.HTMLURL, Action: pr.Action,
		Merged: pr.PullRequest.Merged, MergeCommit: pr.PullRequest.MergeCommitSHA,
		HeadRef: pr.PullRequest.Head.Ref, HeadSHA: pr.PullRequest.Head.SHA, BaseRef: pr.PullRequest.Base.Ref,
		Actor: pr.Sender.Login, Sender: sender, DeliveryID: delivery,
	}
	if p.Number == 0 {
		p.Number = pr.PullRequest.Number
	}
	if p.RepoURL == "" && pr.Repository.HTMLURL != "" {
		p.RepoURL = pr.Repository.HTMLURL + ".git"
	}
	if p.Merged && pr.PullRequest.MergedBy.Login != "" {
		p.Actor = pr.PullRequest.MergedBy.Login
	}
	return gitPullRequestEvent(d, res, key, p)
}
