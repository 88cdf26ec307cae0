package intake

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flotilla-cd/flotilla/events"
)

// SenderGitLab is the sender type of GitLab project, group and system hooks.
const SenderGitLab = "gitlab"

// GitLabSender reads GitLab "Push Hook" and "Tag Push Hook" deliveries, and
// the push and tag_push deliveries of a "System Hook". Each becomes one
// [TypeGitPushed]; a deleted branch or tag, and every other event, is
// ignored.
//
// Authentication: X-Gitlab-Token carries the hook's secret token in plain
// text; it is compared in constant time.
//
// Delivery id: Idempotency-Key (GitLab 17.4 and later), which GitLab keeps
// when it resends a delivery; else X-Gitlab-Event-UUID, else
// X-Gitlab-Webhook-UUID; else the hash of the body. X-Gitlab-Event-UUID and
// X-Gitlab-Webhook-UUID are drawn anew for a resent delivery, so only
// Idempotency-Key lets the journal recognize it.
//
// Changed paths: GitLab lists at most the latest 20 commits of a push
// (total_commits_count says how many there were). When it left commits out,
// the paths of the listed ones are not those of the push, and ChangedPaths is
// left empty rather than partial: a consumer must then compare Before and
// After itself.
type GitLabSender struct {
	// Secret is the receiver's secret: the hook's secret token.
	Secret string
}

// newGitLabSender builds the sender of a "gitlab" receiver.
func newGitLabSender(rc ReceiverConfig) (Sender, error) {
	return GitLabSender{Secret: rc.Secret}, nil
}

// GitLab event header values and object kinds.
const (
	gitlabPushHook    = "Push Hook"
	gitlabTagPushHook = "Tag Push Hook"
	gitlabSystemHook  = "System Hook"
	gitlabKindPush    = "push"
	gitlabKindTagPush = "tag_push"
)

type gitlabPush struct {
	ObjectKind string `json:"object_kind"`
	EventName  string `json:"event_name"`
	Ref        string `json:"ref"`
	Before     string `json:"before"`
	After      string `json:"after"`
	// CheckoutSHA is null when the ref was deleted.
	CheckoutSHA  *string `json:"checkout_sha"`
	UserUsername string  `json:"user_username"`
	UserName     string  `json:"user_name"`
	Project      struct {
		GitHTTPURL string `json:"git_http_url"`
		WebURL     string `json:"web_url"`
	} `json:"project"`
	// Repository is deprecated in favour of Project; old GitLab sends only
	// this.
	Repository struct {
		GitHTTPURL string `json:"git_http_url"`
	} `json:"repository"`
	Commits           []gitCommitFiles `json:"commits"`
	TotalCommitsCount gitCount         `json:"total_commits_count"`
}

// kind is the object kind of the payload: object_kind, or event_name in
// system hook payloads that lack it.
func (p gitlabPush) kind() string {
	if p.ObjectKind != "" {
		return p.ObjectKind
	}
	return p.EventName
}

// Authenticate implements [Sender].
func (s GitLabSender) Authenticate(_ context.Context, d *Delivery) error {
	return checkHeaderToken(d, "X-Gitlab-Token", s.Secret)
}

// Parse implements [Sender].
func (GitLabSender) Parse(d *Delivery) (Result, error) {
	event := d.Header.Get("X-Gitlab-Event")
	if event == "" {
		return Result{}, malformed("missing X-Gitlab-Event header")
	}
	delivery, key := gitlabDeliveryID(d)
	res := Result{DeliveryID: delivery}
	switch event {
	case gitlabPushHook, gitlabTagPushHook, gitlabSystemHook:
	case gitlabMergeRequestHook:
		return parseGitLabMergeRequest(d, res, key, delivery)
	default:
		res.Ignored = fmt.Sprintf("event %q", event)
		return res, nil
	}
	if err := gitJSONMediaType(d, "GitLab"); err != nil {
		return Result{}, err
	}
	var push gitlabPush
	if err := json.Unmarshal(d.Body, &push); err != nil {
		return Result{}, malformed("decoding GitLab push: %w", err)
	}
	if event == gitlabSystemHook {
		if k := push.kind(); k != gitlabKindPush && k != gitlabKindTagPush {
			res.Ignored = fmt.Sprintf("system hook %q", k)
			return res, nil
		}
	}
	p, err := gitlabPushed(push, d, delivery)
	if err != nil {
		return Result{}, err
	}
	return gitPushResult(d, res, key, p, gitlabDeleted(push), push.Commits, int(push.TotalCommitsCount) <= len(push.Commits))
}

// gitlabPushed fills the payload fields GitLab gives, except the changed
// paths.
func gitlabPushed(push gitlabPush, d *Delivery, delivery string) (events.GitPushed, error) {
	if push.Ref == "" {
		return events.GitPushed{}, malformed("GitLab push has no ref")
	}
	p := events.GitPushed{
		RepoURL:    push.Project.GitHTTPURL,
		Ref:        push.Ref,
		Before:     push.Before,
		After:      push.After,
		Pusher:     push.UserUsername,
		Sender:     SenderGitLab,
		Receiver:   d.Receiver,
		DeliveryID: delivery,
	}
	if p.RepoURL == "" {
		p.RepoURL = push.Repository.GitHTTPURL
	}
	if p.RepoURL == "" && push.Project.WebURL != "" {
		p.RepoURL = push.Project.WebURL + ".git"
	}
	if p.RepoURL == "" {
		return events.GitPushed{}, malformed("GitLab push has no project.git_http_url")
	}
	if p.Pusher == "" {
		p.Pusher = push.UserName
	}
	return p, nil
}

// gitlabDeleted tells whether push deletes its ref: after is the null object
// id, or, in a payload without after, checkout_sha is null.
func gitlabDeleted(push gitlabPush) bool {
	if push.After == "" {
		return push.CheckoutSHA == nil
	}
	return gitNullSHA(push.After)
}

// gitlabDeliveryID returns the delivery id GitLab sent ("" when none) and
// the key of the delivery's event: the id, else the hash of the body.
func gitlabDeliveryID(d *Delivery) (id, key string) {
	for _, h := range []string{"Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"} {
		if v := strings.TrimSpace(d.Header.Get(h)); v != "" {
			return v, v
		}
	}
	return "", bodyKey(d)
}

// gitlabMergeRequestHook is the X-Gitlab-Event of merge request events.
const gitlabMergeRequestHook = "Merge Request Hook"

type gitlabMergeRequest struct {
	ObjectKind string `json:"object_kind"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	Project struct {
		GitHTTPURL string `json:"git_http_url"`
		WebURL     string `json:"web_url"`
	} `json:"project"`
	ObjectAttributes struct {
		IID            int64  `json:"iid"`
		URL            string `json:"url"`
		Action         string `json:"action"`
		State          string `json:"state"`
		MergeCommitSHA string `json:"merge_commit_sha"`
		SourceBranch   string `json:"source_branch"`
		TargetBranch   string `json:"target_branch"`
		LastCommit     struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// parseGitLabMergeRequest reads a "Merge Request Hook" delivery.
func parseGitLabMergeRequest(d *Delivery, res Result, key, delivery string) (Result, error) {
	if err := gitJSONMediaType(d, "GitLab"); err != nil {
		return Result{}, err
	}
	var mr gitlabMergeRequest
	if err := json.Unmarshal(d.Body, &mr); err != nil {
		return Result{}, malformed("decoding GitLab merge request: %w", err)
	}
	a := mr.ObjectAttributes
	p := events.GitPullRequest{
		RepoURL: mr.Project.GitHTTPURL, Number: a.IID, URL: a.URL, Action: a.Action,
		Merged: a.State == "merged", MergeCommit: a.MergeCommitSHA,
		HeadRef: a.SourceBranch, HeadSHA: a.LastCommit.ID, BaseRef: a.TargetBranch,
		Actor: mr.User.Username, Sender: SenderGitLab, DeliveryID: delivery,
	}
	if p.RepoURL == "" && mr.Project.WebURL != "" {
		p.RepoURL = mr.Project.WebURL + ".git"
	}
	return gitPullRequestEvent(d, res, key, p)
}
