package pullrequest_test

import (
	"encoding/json"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
)

// These tests replay GitHub's REST and GraphQL answers as documented
// (docs.github.com, "REST API endpoints for pull requests" and the
// enablePullRequestAutoMerge mutation): recorded exchanges, not a live
// GitHub, which this machine cannot reach. Gitea's client is tested
// against a real server (gitea_test.go).

type exchange struct {
	method, path string
	status       int
	body         string
}

// replay serves the exchanges in order and records the request bodies.
type replay struct {
	t      *testing.T
	mu     sync.Mutex
	script []exchange
	bodies []string
}

func (r *replay) ServeHTTP(w nethttp.ResponseWriter, req *nethttp.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	body, _ := io.ReadAll(req.Body)
	if len(r.script) == 0 {
		r.t.Errorf("unexpected %s %s", req.Method, req.URL.Path)
		w.WriteHeader(nethttp.StatusTeapot)
		return
	}
	x := r.script[0]
	r.script = r.script[1:]
	if req.Method != x.method || req.URL.Path != x.path {
		r.t.Errorf("request %s %s, want %s %s", req.Method, req.URL.Path, x.method, x.path)
	}
	r.bodies = append(r.bodies, string(body))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(x.status)
	_, _ = io.WriteString(w, x.body)
}

func (r *replay) done() {
	r.t.Helper()
	if len(r.script) > 0 {
		r.t.Errorf("%d exchanges not made, next %s %s", len(r.script), r.script[0].method, r.script[0].path)
	}
}

func githubPR(number int, state string, merged bool) string {
	b, _ := json.Marshal(map[string]any{
		"number": number, "state": state, "merged": merged, "html_url": "https://github.com/shop/deploy/pull/7", "node_id": "PR_kwDO",
		"merge_commit_sha": "mergesha", "head": map[string]any{"ref": "flotilla/r1/1", "sha": "headsha"},
	})
	return string(b)
}

func githubHost(t *testing.T, script []exchange) (pullrequest.Host, *replay) {
	t.Helper()
	r := &replay{t: t, script: script}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	h, err := pullrequest.New(pullrequest.Config{Kind: pullrequest.KindGitHub, APIURL: srv.URL + "/api/v3/", Repository: "shop/deploy", Token: "t", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

func TestGitHubOpen(t *testing.T) {
	h, r := githubHost(t, []exchange{
		{"GET", "/api/v3/repos/shop/deploy/pulls", 200, "[]"},
		{"POST", "/api/v3/repos/shop/deploy/pulls", 201, githubPR(7, "open", false)},
		{"POST", "/api/v3/repos/shop/deploy/issues/7/labels", 200, `[{"name":"flotilla"}]`},
		{"POST", "/api/v3/repos/shop/deploy/pulls/7/requested_reviewers", 201, githubPR(7, "open", false)},
		{"GET", "/api/v3/repos/shop/deploy/pulls", 200, "[" + githubPR(7, "open", false) + "]"},
	})
	pr := pullrequest.PR{Head: "flotilla/r1/1", Base: "main", Title: "t", Body: "b", Labels: []string{"flotilla"}, Reviewers: []string{"alice"}}
	in, err := h.Open(t.Context(), pr)
	if err != nil || in.Number != 7 || in.State != pullrequest.Open || in.HeadSHA != "headsha" {
		t.Fatalf("Open = %+v, %v", in, err)
	}
	if !strings.Contains(r.bodies[1], `"head":"flotilla/r1/1"`) || !strings.Contains(r.bodies[3], `"alice"`) {
		t.Errorf("requests: %q", r.bodies)
	}
	again, err := h.Open(t.Context(), pr)
	if err != nil || again.Number != 7 {
		t.Errorf("second Open = %+v, %v; want #7 found", again, err)
	}
	r.done()
}

func TestGitHubAutoMerge(t *testing.T) {
	t.Run("scheduled", func(t *testing.T) {
		h, r := githubHost(t, []exchange{
			{"GET", "/api/v3/repos/shop/deploy/pulls/7", 200, githubPR(7, "open", false)},
			{"POST", "/api/graphql", 200, `{"data":{"enablePullRequestAutoMerge":{"clientMutationId":null}}}`},
		})
		am, err := h.AutoMerge(t.Context(), 7, "headsha")
		if err != nil || am.State != pullrequest.AutoScheduled {
			t.Errorf("AutoMerge = %+v, %v; want scheduled", am, err)
		}
		if !strings.Contains(r.bodies[1], `"id":"PR_kwDO"`) || !strings.Contains(r.bodies[1], `"method":"MERGE"`) {
			t.Errorf("graphql request = %s", r.bodies[1])
		}
		r.done()
	})
	t.Run("clean: merged now", func(t *testing.T) {
		h, r := githubHost(t, []exchange{
			{"GET", "/api/v3/repos/shop/deploy/pulls/7", 200, githubPR(7, "open", false)},
			{"POST", "/api/graphql", 200, `{"errors":[{"message":"Pull request Pull request is in clean status"}]}`},
			{"PUT", "/api/v3/repos/shop/deploy/pulls/7/merge", 200, `{"sha":"mergesha","merged":true}`},
		})
		am, err := h.AutoMerge(t.Context(), 7, "headsha")
		if err != nil || am.State != pullrequest.AutoMerged {
			t.Errorf("AutoMerge = %+v, %v; want merged", am, err)
		}
		r.done()
	})
	t.Run("not allowed", func(t *testing.T) {
		h, r := githubHost(t, []exchange{
			{"GET", "/api/v3/repos/shop/deploy/pulls/7", 200, githubPR(7, "open", false)},
			{"POST", "/api/graphql", 200, `{"errors":[{"message":"Auto merge is not allowed for this repository"}]}`},
		})
		am, err := h.AutoMerge(t.Context(), 7, "headsha")
		if err != nil || am.State != pullrequest.AutoUnsupported || !strings.Contains(am.Reason, "not allowed") {
			t.Errorf("AutoMerge = %+v, %v; want unsupported with GitHub's reason", am, err)
		}
		r.done()
	})
}

func TestGitHubGetAndClose(t *testing.T) {
	h, r := githubHost(t, []exchange{
		{"GET", "/api/v3/repos/shop/deploy/pulls/7", 200, githubPR(7, "closed", true)},
		{"GET", "/api/v3/repos/shop/deploy/pulls/8", 200, githubPR(8, "open", false)},
		{"POST", "/api/v3/repos/shop/deploy/issues/8/comments", 201, `{"id":1}`},
		{"PATCH", "/api/v3/repos/shop/deploy/pulls/8", 200, githubPR(8, "closed", false)},
		{"GET", "/api/v3/repos/shop/deploy/pulls/9", 404, `{"message":"Not Found"}`},
		{"GET", "/api/v3/repos/shop/deploy/pulls/9", 502, `{"message":"Bad Gateway"}`},
	})
	in, err := h.Get(t.Context(), 7)
	if err != nil || in.State != pullrequest.Merged || in.MergeCommit != "mergesha" {
		t.Errorf("Get = %+v, %v; want merged", in, err)
	}
	if err := h.Close(t.Context(), 8, "superseded"); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !strings.Contains(r.bodies[3], `"state":"closed"`) {
		t.Errorf("close request = %s", r.bodies[3])
	}
	if _, err := h.Get(t.Context(), 9); !fault.IsPermanent(err) {
		t.Errorf("Get of a 404 = %v, want permanent", err)
	}
	if _, err := h.Get(t.Context(), 9); err == nil || fault.IsPermanent(err) {
		t.Errorf("Get of a 502 = %v, want retryable", err)
	}
	r.done()
}
