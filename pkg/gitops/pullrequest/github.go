package pullrequest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v89/github"
)

// githubHost talks to GitHub and GitHub Enterprise Server
// (github.com/google/go-github).
type githubHost struct {
	c           Config
	gh          *github.Client
	owner, name string
	graphql     string
}

// gitHubAPI is github.com's API, which needs no Enterprise URLs.
const gitHubAPI = "https://api.github.com/"

func newGitHub(c Config) (Host, error) {
	owner, name, err := ownerName(c.Repository)
	if err != nil {
		return nil, err
	}
	opts := []github.ClientOptionsFunc{github.WithHTTPClient(c.HTTPClient), github.WithAuthToken(c.Token)}
	graphql := "https://api.github.com/graphql"
	if base := strings.TrimSuffix(c.APIURL, "/") + "/"; base != gitHubAPI {
		opts = append(opts, github.WithEnterpriseURLs(base, base))
	}
	gh, err := github.NewClient(opts...)
	if err != nil {
		return nil, classify("github client", http.StatusBadRequest, err)
	}
	if gh.BaseURL() != gitHubAPI {
		// GitHub Enterprise Server: https://host/api/v3/ -> https://host/api/graphql.
		graphql = strings.TrimSuffix(strings.TrimSuffix(gh.BaseURL(), "/"), "/v3") + "/graphql"
	}
	return &githubHost{c: c, gh: gh, owner: owner, name: name, graphql: graphql}, nil
}

func (h *githubHost) Open(ctx context.Context, p PR) (Info, error) {
	prs, resp, err := h.gh.PullRequests.List(ctx, h.owner, h.name, &github.PullRequestListOptions{
		State: "all", Head: h.owner + ":" + p.Head, Base: p.Base,
	})
	if err != nil {
		return Info{}, githubErr("finding the pull request of "+p.Head, resp, err)
	}
	if len(prs) > 0 {
		return githubInfo(prs[0]), nil
	}
	pr, resp, err := h.gh.PullRequests.Create(ctx, h.owner, h.name, &github.NewPullRequest{
		Title: &p.Title, Head: &p.Head, Base: &p.Base, Body: &p.Body,
	})
	if err != nil {
		return Info{}, githubErr("opening a pull request of "+p.Head, resp, err)
	}
	if len(p.Labels) > 0 {
		if _, resp, err := h.gh.Issues.AddLabelsToIssue(ctx, h.owner, h.name, pr.GetNumber(), p.Labels); err != nil {
			return Info{}, githubErr(fmt.Sprintf("labelling pull request #%d", pr.GetNumber()), resp, err)
		}
	}
	if len(p.Reviewers) > 0 {
		if _, resp, err := h.gh.PullRequests.RequestReviewers(ctx, h.owner, h.name, pr.GetNumber(), github.ReviewersRequest{Reviewers: p.Reviewers}); err != nil {
			return Info{}, githubErr(fmt.Sprintf("asking for reviews of pull request #%d", pr.GetNumber()), resp, err)
		}
	}
	return githubInfo(pr), nil
}

func (h *githubHost) Get(ctx context.Context, number int64) (Info, error) {
	pr, resp, err := h.gh.PullRequests.Get(ctx, h.owner, h.name, int(number))
	if err != nil {
		return Info{}, githubErr(fmt.Sprintf("reading pull request #%d", number), resp, err)
	}
	return githubInfo(pr), nil
}

// AutoMerge enables GitHub's auto-merge, which only GraphQL can do
// (enablePullRequestAutoMerge). GitHub refuses it for a pull request that
// can merge now ("clean status"): that one is merged at once, at head.
func (h *githubHost) AutoMerge(ctx context.Context, number int64, head string) (AutoMerge, error) {
	pr, resp, err := h.gh.PullRequests.Get(ctx, h.owner, h.name, int(number))
	if err != nil {
		return AutoMerge{}, githubErr(fmt.Sprintf("reading pull request #%d", number), resp, err)
	}
	method := strings.ToUpper(h.c.MergeMethod)
	query := `mutation($id: ID!, $method: PullRequestMergeMethod!, $head: GitObjectID) {
  enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: $method, expectedHeadOid: $head}) { clientMutationId }
}`
	msg, err := h.graphQL(ctx, query, map[string]any{"id": pr.GetNodeID(), "method": method, "head": head})
	if err != nil {
		return AutoMerge{}, err
	}
	switch {
	case msg == "":
		return AutoMerge{State: AutoScheduled}, nil
	case !strings.Contains(strings.ToLower(msg), "clean status"):
		return AutoMerge{State: AutoUnsupported, Reason: msg}, nil
	}
	_, resp, err = h.gh.PullRequests.Merge(ctx, h.owner, h.name, int(number), "", &github.PullRequestOptions{MergeMethod: h.c.MergeMethod, SHA: head})
	switch {
	case err == nil:
		return AutoMerge{State: AutoMerged}, nil
	case resp != nil && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusConflict):
		return AutoMerge{State: AutoUnsupported, Reason: err.Error()}, nil
	}
	return AutoMerge{}, githubErr(fmt.Sprintf("merging pull request #%d", number), resp, err)
}

// graphQL posts a query and returns the first error GitHub answers with
// ("" when none).
func (h *githubHost) graphQL(ctx context.Context, query string, vars map[string]any) (string, error) {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.graphql, bytes.NewReader(body))
	if err != nil {
		return "", classify("github graphql", http.StatusBadRequest, err)
	}
	req.Header.Set("Authorization", "Bearer "+h.c.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.c.HTTPClient.Do(req)
	if err != nil {
		return "", classify("github graphql", 0, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", classify("github graphql", resp.StatusCode, fmt.Errorf("status %s", resp.Status))
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return "", classify("github graphql", 0, err)
	}
	if len(out.Errors) > 0 {
		return out.Errors[0].Message, nil
	}
	return "", nil
}

func (h *githubHost) Close(ctx context.Context, number int64, comment string) error {
	pr, resp, err := h.gh.PullRequests.Get(ctx, h.owner, h.name, int(number))
	if err != nil {
		return githubErr(fmt.Sprintf("reading pull request #%d", number), resp, err)
	}
	if pr.GetState() == "closed" {
		return nil
	}
	if comment != "" {
		if _, resp, err := h.gh.Issues.CreateComment(ctx, h.owner, h.name, int(number), &github.IssueComment{Body: &comment}); err != nil {
			return githubErr(fmt.Sprintf("commenting on pull request #%d", number), resp, err)
		}
	}
	if _, resp, err := h.gh.PullRequests.Edit(ctx, h.owner, h.name, int(number), &github.PullRequest{State: github.Ptr("closed")}); err != nil {
		return githubErr(fmt.Sprintf("closing pull request #%d", number), resp, err)
	}
	return nil
}

func githubInfo(pr *github.PullRequest) Info {
	in := Info{Number: int64(pr.GetNumber()), URL: pr.GetHTMLURL(), HeadRef: pr.GetHead().GetRef(), HeadSHA: pr.GetHead().GetSHA(), State: Open}
	switch {
	case pr.GetMerged() || pr.MergedAt != nil: // lists carry merged_at only
		in.State, in.MergeCommit = Merged, pr.GetMergeCommitSHA()
	case pr.GetState() == "closed":
		in.State = Closed
	}
	return in
}

// githubErr classifies a go-github error: rate limits are retried whatever
// their status.
func githubErr(what string, resp *github.Response, err error) error {
	var rl *github.RateLimitError
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &rl) || errors.As(err, &abuse) {
		return classify(what, http.StatusTooManyRequests, err)
	}
	code := 0
	if resp != nil && resp.Response != nil {
		code = resp.StatusCode
	}
	return classify(what, code, err)
}
