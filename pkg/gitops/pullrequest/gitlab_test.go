package pullrequest_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
)

// These tests replay GitLab's REST answers as documented (docs.gitlab.com,
// "Merge requests API"): recorded exchanges, not a live GitLab.

func gitlabMR(iid int, state string) string {
	b, _ := json.Marshal(map[string]any{
		"id": 100 + iid, "iid": iid, "state": state, "web_url": "https://gitlab.example.com/shop/deploy/-/merge_requests/3",
		"source_branch": "flotilla/r1/1", "target_branch": "main", "sha": "headsha", "merge_commit_sha": "mergesha",
	})
	return string(b)
}

func gitlabHost(t *testing.T, script []exchange) (pullrequest.Host, *replay) {
	t.Helper()
	r := &replay{t: t, script: script}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	h, err := pullrequest.New(pullrequest.Config{Kind: pullrequest.KindGitLab, APIURL: srv.URL + "/api/v4", Repository: "shop/sub/deploy", Token: "t", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

const gitlabProject = "/api/v4/projects/shop/sub/deploy"

func TestGitLabLifecycle(t *testing.T) {
	h, r := gitlabHost(t, []exchange{
		{"GET", gitlabProject + "/merge_requests", 200, "[]"},
		{"GET", "/api/v4/users", 200, `[{"id":42,"username":"alice"}]`},
		{"POST", gitlabProject + "/merge_requests", 201, gitlabMR(3, "opened")},
		{"PUT", gitlabProject + "/merge_requests/3/merge", 200, gitlabMR(3, "opened")},
		{"GET", gitlabProject + "/merge_requests/3", 200, gitlabMR(3, "merged")},
		{"GET", gitlabProject + "/merge_requests/4", 200, gitlabMR(4, "opened")},
		{"POST", gitlabProject + "/merge_requests/4/notes", 201, `{"id":1}`},
		{"PUT", gitlabProject + "/merge_requests/4", 200, gitlabMR(4, "closed")},
		{"GET", gitlabProject + "/merge_requests/5", 401, `{"message":"401 Unauthorized"}`},
	})
	in, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/r1/1", Base: "main", Title: "t", Body: "b", Labels: []string{"flotilla"}, Reviewers: []string{"alice"}})
	if err != nil || in.Number != 3 || in.State != pullrequest.Open {
		t.Fatalf("Open = %+v, %v", in, err)
	}
	if !strings.Contains(r.bodies[2], `"reviewer_ids":[42]`) || !strings.Contains(r.bodies[2], `"labels":"flotilla"`) {
		t.Errorf("create request = %s", r.bodies[2])
	}
	am, err := h.AutoMerge(t.Context(), 3, "headsha")
	if err != nil || am.State != pullrequest.AutoScheduled || !strings.Contains(r.bodies[3], `"auto_merge":true`) {
		t.Errorf("AutoMerge = %+v, %v (request %s); want scheduled", am, err, r.bodies[3])
	}
	if in, err := h.Get(t.Context(), 3); err != nil || in.State != pullrequest.Merged || in.MergeCommit != "mergesha" {
		t.Errorf("Get = %+v, %v; want merged", in, err)
	}
	if err := h.Close(t.Context(), 4, "superseded"); err != nil || !strings.Contains(r.bodies[7], `"state_event":"close"`) {
		t.Errorf("Close: %v (request %s)", err, r.bodies[7])
	}
	if _, err := h.Get(t.Context(), 5); !fault.IsPermanent(err) {
		t.Errorf("Get of a 401 = %v, want permanent", err)
	}
	r.done()
}

// mergeMethod squash asks GitLab to squash; rebase is a project setting on
// GitLab, so it is unsupported there, asking nothing.
func TestGitLabMergeMethods(t *testing.T) {
	for _, tt := range []struct {
		method string
		script []exchange
		want   pullrequest.AutoMergeState
	}{
		{pullrequest.MethodSquash, []exchange{{"PUT", gitlabProject + "/merge_requests/3/merge", 200, gitlabMR(3, "merged")}}, pullrequest.AutoMerged},
		{pullrequest.MethodRebase, nil, pullrequest.AutoUnsupported},
	} {
		t.Run(tt.method, func(t *testing.T) {
			r := &replay{t: t, script: tt.script}
			srv := httptest.NewServer(r)
			defer srv.Close()
			h, err := pullrequest.New(pullrequest.Config{Kind: pullrequest.KindGitLab, APIURL: srv.URL + "/api/v4", Repository: "shop/sub/deploy",
				Token: "t", MergeMethod: tt.method, HTTPClient: srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			am, err := h.AutoMerge(t.Context(), 3, "headsha")
			if err != nil || am.State != tt.want {
				t.Errorf("AutoMerge = %+v, %v; want %s", am, err, tt.want)
			}
			if tt.method == pullrequest.MethodSquash && (len(r.bodies) != 1 || !strings.Contains(r.bodies[0], `"squash":true`)) {
				t.Errorf("merge request = %q; want squash", r.bodies)
			}
			r.done()
		})
	}
}
