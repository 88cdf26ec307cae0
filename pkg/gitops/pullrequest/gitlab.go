package pullrequest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	gitlab "gitlab.com/gitlab-org/api/client-go"
)

// gitlabHost talks to GitLab (gitlab.com/gitlab-org/api/client-go): merge
// requests of a project given by its full path.
type gitlabHost struct {
	c       Config
	gl      *gitlab.Client
	project string
}

func newGitLab(c Config) (Host, error) {
	if _, _, err := ownerName(c.Repository); err != nil && !nested(c.Repository) {
		return nil, err
	}
	gl, err := gitlab.NewClient(c.Token, gitlab.WithBaseURL(c.APIURL), gitlab.WithHTTPClient(c.HTTPClient))
	if err != nil {
		return nil, classify("gitlab client", http.StatusBadRequest, err)
	}
	return &gitlabHost{c: c, gl: gl, project: c.Repository}, nil
}

// nested tells whether a GitLab project path has groups: "group/sub/name".
func nested(path string) bool {
	n := 0
	for _, part := range splitPath(path) {
		if part == "" {
			return false
		}
		n++
	}
	return n >= 2
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := range len(p) {
		if p[i] == '/' {
			out = append(out, p[start:i])
			start = i + 1
		}
	}
	return append(out, p[start:])
}

func (h *gitlabHost) Open(ctx context.Context, p PR) (Info, error) {
	mrs, resp, err := h.gl.MergeRequests.ListProjectMergeRequests(h.project, &gitlab.ListProjectMergeRequestsOptions{
		SourceBranch: &p.Head, TargetBranch: &p.Base, State: gitlab.Ptr("all"),
	}, gitlab.WithContext(ctx))
	if err != nil {
		return Info{}, gitlabErr("finding the merge request of "+p.Head, resp, err)
	}
	if len(mrs) > 0 {
		return gitlabBasicInfo(mrs[0]), nil
	}
	opts := &gitlab.CreateMergeRequestOptions{Title: &p.Title, Description: &p.Body, SourceBranch: &p.Head, TargetBranch: &p.Base}
	if len(p.Labels) > 0 {
		l := gitlab.LabelOptions(p.Labels)
		opts.Labels = &l
	}
	if len(p.Reviewers) > 0 {
		ids, err := h.userIDs(ctx, p.Reviewers)
		if err != nil {
			return Info{}, err
		}
		opts.ReviewerIDs = &ids
	}
	mr, resp, err := h.gl.MergeRequests.CreateMergeRequest(h.project, opts, gitlab.WithContext(ctx))
	if err != nil {
		return Info{}, gitlabErr("opening a merge request of "+p.Head, resp, err)
	}
	return gitlabInfo(mr), nil
}

// userIDs maps user names to ids: GitLab asks reviewers by id.
func (h *gitlabHost) userIDs(ctx context.Context, names []string) ([]int64, error) {
	ids := make([]int64, 0, len(names))
	for _, n := range names {
		users, resp, err := h.gl.Users.ListUsers(&gitlab.ListUsersOptions{Username: gitlab.Ptr(n)}, gitlab.WithContext(ctx))
		if err != nil {
			return nil, gitlabErr("finding user "+n, resp, err)
		}
		if len(users) == 0 {
			return nil, classify("reviewer "+n, http.StatusNotFound, errors.New("no such user"))
		}
		ids = append(ids, int64(users[0].ID))
	}
	return ids, nil
}

func (h *gitlabHost) Get(ctx context.Context, number int64) (Info, error) {
	mr, resp, err := h.gl.MergeRequests.GetMergeRequest(h.project, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return Info{}, gitlabErr(fmt.Sprintf("reading merge request !%d", number), resp, err)
	}
	return gitlabInfo(mr), nil
}

// AutoMerge accepts the merge request with auto_merge: GitLab merges it
// now, or when its pipeline succeeds.
func (h *gitlabHost) AutoMerge(ctx context.Context, number int64, head string) (AutoMerge, error) {
	opts := &gitlab.AcceptMergeRequestOptions{AutoMerge: gitlab.Ptr(true), SHA: &head}
	switch h.c.MergeMethod {
	case MethodSquash:
		opts.Squash = gitlab.Ptr(true)
	case MethodRebase:
		return AutoMerge{State: AutoUnsupported, Reason: "GitLab merges by the project's merge method; rebase is a project setting"}, nil
	}
	mr, resp, err := h.gl.MergeRequests.AcceptMergeRequest(h.project, number, opts, gitlab.WithContext(ctx))
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotAcceptable ||
			resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusUnprocessableEntity) {
			return AutoMerge{State: AutoUnsupported, Reason: err.Error()}, nil
		}
		return AutoMerge{}, gitlabErr(fmt.Sprintf("merging merge request !%d", number), resp, err)
	}
	if mr.State == "merged" {
		return AutoMerge{State: AutoMerged}, nil
	}
	return AutoMerge{State: AutoScheduled}, nil
}

func (h *gitlabHost) Close(ctx context.Context, number int64, comment string) error {
	mr, resp, err := h.gl.MergeRequests.GetMergeRequest(h.project, number, nil, gitlab.WithContext(ctx))
	if err != nil {
		return gitlabErr(fmt.Sprintf("reading merge request !%d", number), resp, err)
	}
	if mr.State == "closed" || mr.State == "merged" {
		return nil
	}
	if comment != "" {
		if _, resp, err := h.gl.Notes.CreateMergeRequestNote(h.project, number, &gitlab.CreateMergeRequestNoteOptions{Body: &comment}, gitlab.WithContext(ctx)); err != nil {
			return gitlabErr(fmt.Sprintf("commenting on merge request !%d", number), resp, err)
		}
	}
	if _, resp, err := h.gl.MergeRequests.UpdateMergeRequest(h.project, number, &gitlab.UpdateMergeRequestOptions{StateEvent: gitlab.Ptr("close")}, gitlab.WithContext(ctx)); err != nil {
		return gitlabErr(fmt.Sprintf("closing merge request !%d", number), resp, err)
	}
	return nil
}

func gitlabInfo(mr *gitlab.MergeRequest) Info {
	in := gitlabBasicInfo(&mr.BasicMergeRequest)
	return in
}

func gitlabBasicInfo(mr *gitlab.BasicMergeRequest) Info {
	in := Info{Number: int64(mr.IID), URL: mr.WebURL, HeadRef: mr.SourceBranch, HeadSHA: mr.SHA, State: Open}
	switch mr.State {
	case "merged":
		in.State, in.MergeCommit = Merged, mr.MergeCommitSHA
		if in.MergeCommit == "" {
			in.MergeCommit = mr.SquashCommitSHA
		}
	case "closed": // "locked" is a merge under way
		in.State = Closed
	}
	return in
}

func gitlabErr(what string, resp *gitlab.Response, err error) error {
	code := 0
	if resp != nil && resp.Response != nil {
		code = resp.StatusCode
	}
	return classify(what, code, err)
}
