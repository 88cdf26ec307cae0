package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// State of a pull request.
type State string

const (
	Open   State = "open"
	Merged State = "merged"
	Closed State = "closed" // closed without merging
)

// PR is a pull request to open: Head's commits proposed for Base.
type PR struct {
	Head, Base  string
	Title, Body string
	// Labels are put on the pull request, Reviewers asked for a review
	// (user names). Both optional.
	Labels, Reviewers []string
}

// Info is what a host says of a pull request.
type Info struct {
	Number  int64
	URL     string
	HeadRef string
	HeadSHA string
	// MergeCommit is the commit the merge made on the base (or the
	// squashed or rebased head), when State is Merged.
	MergeCommit string
	State       State
}

// AutoMergeState says what asking for an automatic merge did.
type AutoMergeState string

const (
	// AutoMerged: the pull request could merge at once and did.
	AutoMerged AutoMergeState = "merged"
	// AutoScheduled: the host merges it once its required checks pass.
	AutoScheduled AutoMergeState = "scheduled"
	// AutoUnsupported: the host or the repository's settings refuse it; a
	// human merges.
	AutoUnsupported AutoMergeState = "unsupported"
)

// AutoMerge is the answer to asking for an automatic merge.
type AutoMerge struct {
	State AutoMergeState
	// Reason says why it is unsupported.
	Reason string
}

// Host manages the pull requests of one repository on one git host.
type Host interface {
	// Open returns the pull request of p.Head into p.Base, whatever its
	// state, creating it only when there is none.
	Open(ctx context.Context, p PR) (Info, error)
	// Get reads pull request number.
	Get(ctx context.Context, number int64) (Info, error)
	// AutoMerge asks the host to merge pull request number, whose head
	// must still be head, now or once its required checks pass.
	AutoMerge(ctx context.Context, number int64, head string) (AutoMerge, error)
	// Close closes pull request number without merging it, after leaving
	// comment on it (when not empty). Closing a closed one is no error.
	Close(ctx context.Context, number int64, comment string) error
}

// Kinds of host New knows.
const (
	KindGitHub  = "github"
	KindGitLab  = "gitlab"
	KindGitea   = "gitea"
	KindForgejo = "forgejo"
)

// Kinds lists the hosts New knows.
var Kinds = []string{KindGitHub, KindGitLab, KindGitea, KindForgejo}

// Merge methods.
const (
	MethodMerge  = "merge"
	MethodSquash = "squash"
	MethodRebase = "rebase"
)

// Methods lists the merge methods.
var Methods = []string{MethodMerge, MethodSquash, MethodRebase}

// Config says which host and repository, and how to talk to it.
type Config struct {
	// Kind is one of Kinds.
	Kind string
	// APIURL is the host's API: GitHub's https://api.github.com/ (or an
	// Enterprise server's https://host/api/v3/), GitLab's
	// https://host/api/v4, Gitea's and Forgejo's https://host.
	APIURL string
	// Repository is "owner/name" (GitLab: the project's full path, groups
	// included).
	Repository string
	// Token is the API token.
	Token string
	// MergeMethod is how AutoMerge merges: one of Methods. Default merge.
	MergeMethod string
	// HTTPClient makes the requests. Default http.DefaultClient.
	HTTPClient *http.Client
	// MergeableWait bounds how long AutoMerge waits for a host that
	// checks mergeability in the background (Gitea, Forgejo) before it
	// answers an error the caller may retry. Default 20s.
	MergeableWait time.Duration
}

// New returns the Host of c.Kind.
func New(c Config) (Host, error) {
	if c.MergeMethod == "" {
		c.MergeMethod = MethodMerge
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	if c.MergeableWait <= 0 {
		c.MergeableWait = 20 * time.Second
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fault.Permanent(fmt.Errorf("pull requests: API URL %q: want an absolute http(s) URL", c.APIURL))
	}
	if c.Token == "" {
		return nil, fault.Permanent(errors.New("pull requests: no API token"))
	}
	switch c.Kind {
	case KindGitHub:
		return newGitHub(c)
	case KindGitLab:
		return newGitLab(c)
	case KindGitea, KindForgejo:
		return newGitea(c)
	}
	return nil, fault.Permanent(fmt.Errorf("pull requests: host %q: want one of %s", c.Kind, strings.Join(Kinds, ", ")))
}

// ownerName splits "owner/name".
func ownerName(repository string) (string, string, error) {
	owner, name, ok := strings.Cut(strings.Trim(repository, "/"), "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fault.Permanent(fmt.Errorf("pull requests: repository %q: want owner/name", repository))
	}
	return owner, name, nil
}

// classify marks what retrying cannot fix as permanent, from the status of
// the host's answer (0 when there was none: a network error).
func classify(what string, status int, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s: %w", what, err)
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone:
		return fault.Permanent(err)
	}
	return err
}
