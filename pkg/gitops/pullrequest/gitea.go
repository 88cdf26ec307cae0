package pullrequest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// giteaHost talks to Gitea and Forgejo (code.gitea.io/sdk/gitea).
type giteaHost struct {
	c           Config
	owner, name string
}

func newGitea(c Config) (Host, error) {
	owner, name, err := ownerName(c.Repository)
	if err != nil {
		return nil, err
	}
	return &giteaHost{c: c, owner: owner, name: name}, nil
}

// client is one client per call: the SDK's context is client-wide. An
// empty version skips the SDK's /version probe (Forgejo's differs).
func (h *giteaHost) client(ctx context.Context) (*gitea.Client, error) {
	c, _, err := h.clientTold(ctx)
	return c, err
}

// clientTold is client, and what Gitea said in its last error answer:
// the SDK drops the body of some (a merge's).
func (h *giteaHost) clientTold(ctx context.Context) (*gitea.Client, *answer, error) {
	told := &answer{next: h.c.HTTPClient.Transport}
	if told.next == nil {
		told.next = http.DefaultTransport
	}
	hc := *h.c.HTTPClient
	hc.Transport = told
	c, err := gitea.NewClient(h.c.APIURL, gitea.SetToken(h.c.Token), gitea.SetContext(ctx),
		gitea.SetHTTPClient(&hc), gitea.SetGiteaVersion(""))
	if err != nil {
		return nil, nil, fault.Permanent(fmt.Errorf("gitea client: %w", err))
	}
	return c, told, nil
}

// answer keeps the message of the last error answer it carried (Gitea's
// JSON {"message": ...}, else the body's start), leaving the body to read.
type answer struct {
	next    http.RoundTripper
	mu      sync.Mutex
	message string
}

func (a *answer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if rerr != nil {
		return resp, nil
	}
	var said struct{ Message string }
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &said) == nil && said.Message != "" {
		msg = said.Message
	}
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	a.mu.Lock()
	a.message = msg
	a.mu.Unlock()
	return resp, nil
}

// said is the last error answer's message.
func (a *answer) said() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.message
}

func (h *giteaHost) Open(ctx context.Context, p PR) (Info, error) {
	c, err := h.client(ctx)
	if err != nil {
		return Info{}, err
	}
	pr, resp, err := c.GetPullRequestByBaseHead(h.owner, h.name, p.Base, p.Head)
	if err == nil {
		return giteaInfo(pr), nil
	}
	if status(resp) != http.StatusNotFound {
		return Info{}, classify("finding the pull request of "+p.Head, status(resp), err)
	}
	labels, err := h.labelIDs(c, p.Labels)
	if err != nil {
		return Info{}, err
	}
	opt := gitea.CreatePullRequestOption{
		Head: p.Head, Base: p.Base, Title: p.Title, Body: p.Body, Labels: labels, Reviewers: p.Reviewers,
	}
	// Gitea records a pushed branch from a queue: for a moment after the
	// push, opening a pull request of it answers 404. Ask again meanwhile.
	deadline := time.Now().Add(BranchWait)
	for pause := 200 * time.Millisecond; ; pause = min(2*pause, time.Second) {
		pr, resp, err = c.CreatePullRequest(h.owner, h.name, opt)
		if err == nil {
			return giteaInfo(pr), nil
		}
		if status(resp) != http.StatusNotFound || time.Now().Add(pause).After(deadline) {
			return Info{}, classify("opening a pull request of "+p.Head, status(resp), err)
		}
		select {
		case <-ctx.Done():
			return Info{}, classify("opening a pull request of "+p.Head, status(resp), err)
		case <-time.After(pause):
		}
	}
}

// BranchWait is how long Gitea is asked again to open the pull request of a
// branch it answers 404 for: one just pushed, not recorded yet.
const BranchWait = 5 * time.Second

// labelIDs maps label names to the repository's label ids: Gitea takes
// ids. A label the repository lacks is an error naming it.
func (h *giteaHost) labelIDs(c *gitea.Client, names []string) ([]int64, error) {
	if len(names) == 0 {
		return nil, nil
	}
	var ids []int64
	found := map[string]bool{}
	for page := 1; ; page++ {
		labels, resp, err := c.ListRepoLabels(h.owner, h.name, gitea.ListLabelsOptions{ListOptions: gitea.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			return nil, classify("listing labels", status(resp), err)
		}
		for _, l := range labels {
			if slices.Contains(names, l.Name) && !found[l.Name] {
				found[l.Name] = true
				ids = append(ids, l.ID)
			}
		}
		if len(labels) < 50 {
			break
		}
	}
	for _, n := range names {
		if !found[n] {
			return nil, fault.Permanent(fmt.Errorf("label %q: the repository %s/%s has no such label", n, h.owner, h.name))
		}
	}
	return ids, nil
}

func (h *giteaHost) Get(ctx context.Context, number int64) (Info, error) {
	c, err := h.client(ctx)
	if err != nil {
		return Info{}, err
	}
	pr, resp, err := c.GetPullRequest(h.owner, h.name, number)
	if err != nil {
		return Info{}, classify(fmt.Sprintf("reading pull request #%d", number), status(resp), err)
	}
	return giteaInfo(pr), nil
}

// AutoMerge merges at once when the pull request may merge; else (required
// checks pending) it schedules Gitea's merge for when they pass. Gitea
// schedules rather than merges even when nothing is required, so the
// direct merge comes first. Gitea checks a new pull request's
// mergeability in the background and refuses merges meanwhile with the
// same 405 as a conflict (the SDK keeps no message), so AutoMerge waits
// for the check first.
func (h *giteaHost) AutoMerge(ctx context.Context, number int64, head string) (AutoMerge, error) {
	c, told, err := h.clientTold(ctx)
	if err != nil {
		return AutoMerge{}, err
	}
	what := fmt.Sprintf("merging pull request #%d", number)
	style := map[string]gitea.MergeStyle{MethodMerge: gitea.MergeStyleMerge, MethodSquash: gitea.MergeStyleSquash, MethodRebase: gitea.MergeStyleRebase}[h.c.MergeMethod]
	// Gitea schedules a merge by a method the repository turns off (and
	// never does it): ask first.
	if why := h.methodOff(c); why != "" {
		return AutoMerge{State: AutoUnsupported, Reason: why}, nil
	}
	for wait := time.Now().Add(h.c.MergeableWait); ; {
		pr, resp, err := c.GetPullRequest(h.owner, h.name, number)
		if err != nil {
			return AutoMerge{}, classify(fmt.Sprintf("reading pull request #%d", number), status(resp), err)
		}
		if pr.HasMerged {
			return AutoMerge{State: AutoMerged}, nil
		}
		if pr.Mergeable {
			am, refused, err := h.merge(c, told, number, head, style)
			if !refused {
				return am, err
			}
		}
		if time.Now().After(wait) {
			// Both may pass (a slow check, a busy Gitea), or need a human
			// (a conflict): the proposer asks again for a while, saying why.
			if !pr.Mergeable {
				return AutoMerge{}, classify(what, 0, fmt.Errorf("Gitea has not found it mergeable in %s (still checking it, or it conflicts with its base)", h.c.MergeableWait)) //nolint:staticcheck // the host, by name, starts what the rollout shows
			}
			if said := told.said(); strings.Contains(strings.ToLower(said), "try again later") {
				return AutoMerge{}, classify(what, 0, fmt.Errorf("Gitea answered 405: %s", said)) //nolint:staticcheck // the host, by name, starts what the rollout shows
			}
			return AutoMerge{State: AutoUnsupported, Reason: fmt.Sprintf("Gitea refused the merge (405: %s)", told.said())}, nil
		}
		// Not checked yet, or refused while Gitea checks it again (its
		// background check can lag its mergeable flag under load).
		select {
		case <-ctx.Done():
			return AutoMerge{}, classify(what, 0, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// merge asks Gitea to merge now, else once the required checks pass;
// refused says it refused both (405).
func (h *giteaHost) merge(c *gitea.Client, told *answer, number int64, head string, style gitea.MergeStyle) (AutoMerge, bool, error) {
	what := fmt.Sprintf("merging pull request #%d", number)
	for _, whenChecks := range []bool{false, true} {
		_, resp, err := c.MergePullRequest(h.owner, h.name, number, gitea.MergePullRequestOption{
			Style: style, HeadCommitId: head, MergeWhenChecksSucceed: whenChecks,
		})
		code := status(resp)
		switch {
		case err != nil:
			return AutoMerge{}, false, classify(what, code, err)
		case code == http.StatusOK:
			return AutoMerge{State: AutoMerged}, false, nil
		case code == http.StatusCreated:
			return AutoMerge{State: AutoScheduled}, false, nil
		case code == http.StatusMethodNotAllowed && !whenChecks:
			continue // required checks not passed yet: schedule it
		case code == http.StatusConflict:
			// The base moved under the merge (another merge landed): the
			// proposer cuts the branch again and asks again.
			return AutoMerge{}, false, classify(what, code, fmt.Errorf("the base moved during the merge: Gitea answered %d: %s", code, told.said()))
		case code == http.StatusMethodNotAllowed:
			return AutoMerge{}, true, nil
		}
		return AutoMerge{}, false, classify(what, code, fmt.Errorf("Gitea answered %d: %s", code, told.said())) //nolint:staticcheck // the host, by name, starts what the rollout shows
	}
	return AutoMerge{}, false, classify(what, 0, errors.New("no merge attempt answered"))
}

// methodOff says so when the repository's settings turn the merge
// method off.
func (h *giteaHost) methodOff(c *gitea.Client) string {
	repo, _, err := c.GetRepo(h.owner, h.name)
	if err != nil {
		return "" // the merge itself will tell
	}
	allowed := map[string]bool{MethodMerge: repo.AllowMerge, MethodSquash: repo.AllowSquash, MethodRebase: repo.AllowRebase}
	if on, known := allowed[h.c.MergeMethod]; known && !on {
		return fmt.Sprintf("the repository does not allow %s merges (its settings)", h.c.MergeMethod)
	}
	return ""
}

func (h *giteaHost) Close(ctx context.Context, number int64, comment string) error {
	c, err := h.client(ctx)
	if err != nil {
		return err
	}
	pr, resp, err := c.GetPullRequest(h.owner, h.name, number)
	if err != nil {
		return classify(fmt.Sprintf("reading pull request #%d", number), status(resp), err)
	}
	if pr.State == gitea.StateClosed {
		return nil
	}
	if comment != "" {
		if _, resp, err := c.CreateIssueComment(h.owner, h.name, number, gitea.CreateIssueCommentOption{Body: comment}); err != nil {
			return classify(fmt.Sprintf("commenting on pull request #%d", number), status(resp), err)
		}
	}
	closed := gitea.StateClosed
	if _, resp, err := c.EditPullRequest(h.owner, h.name, number, gitea.EditPullRequestOption{State: &closed}); err != nil {
		return classify(fmt.Sprintf("closing pull request #%d", number), status(resp), err)
	}
	return nil
}

func giteaInfo(pr *gitea.PullRequest) Info {
	in := Info{Number: pr.Index, URL: pr.HTMLURL, State: Open}
	if pr.Head != nil {
		in.HeadRef, in.HeadSHA = pr.Head.Ref, pr.Head.Sha
	}
	switch {
	case pr.HasMerged:
		in.State = Merged
		if pr.MergedCommitID != nil {
			in.MergeCommit = *pr.MergedCommitID
		}
	case pr.State == gitea.StateClosed:
		in.State = Closed
	}
	return in
}

func status(resp *gitea.Response) int {
	if resp == nil || resp.Response == nil {
		return 0
	}
	return resp.StatusCode
}
