package pullrequest_test

import (
	"context"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"code.gitea.io/sdk/gitea"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/events/intake"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/giteatest"
)

// The tests run against one real Gitea (pkg/testkit/giteatest), each in a
// repository of its own.
var server *giteatest.Server

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "giteatest-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	server, err = giteatest.Start(ctx, filepath.Join(dir, "gitea"))
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting gitea:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	server.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// sdk is the test's own client, as a reviewer's.
func sdk(t *testing.T) *gitea.Client {
	t.Helper()
	c, err := gitea.NewClient(server.URL, gitea.SetToken(server.Token), gitea.SetContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newRepo creates a repository with a README on main and returns the Repo
// gitops pushes to.
func newRepo(t *testing.T, name string) gitops.Repo {
	t.Helper()
	if _, _, err := sdk(t).CreateRepo(gitea.CreateRepoOption{Name: name, AutoInit: true, DefaultBranch: "main", Readme: "Default"}); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	r := gitops.Repo{URL: server.RepoURL(giteatest.Admin, name), Branch: "main",
		Auth: gitops.Auth{Username: giteatest.Admin, Token: server.Token}}
	return r
}

func host(t *testing.T, repo string, opts ...func(*pullrequest.Config)) pullrequest.Host {
	t.Helper()
	c := pullrequest.Config{Kind: pullrequest.KindGitea, APIURL: server.URL, Repository: giteatest.Admin + "/" + repo, Token: server.Token}
	for _, o := range opts {
		o(&c)
	}
	h, err := pullrequest.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// propose pushes a branch changing a file, as gitops does for a wave.
func propose(t *testing.T, r gitops.Repo, branch, tag string) gitops.Proposed {
	t.Helper()
	res, err := gitops.Propose(t.Context(), r, gitops.Proposal{Branch: branch, Changes: []gitops.Change{{
		App: "api", Rollout: "api-r1", Image: gitops.Image{Repository: "registry.example.com/team/api", Tag: tag},
		Files: []gitops.File{{Path: "README.md", Edit: readmeEdit{}}},
	}}})
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	return res
}

// readmeEdit appends the image to the README: any file will do for a pull
// request.
type readmeEdit struct{}

func (readmeEdit) Apply(src []byte, img gitops.Image) ([]byte, bool, error) {
	line := "\nimage: " + img.Reference() + "\n"
	if len(src) >= len(line) && string(src[len(src)-len(line):]) == line {
		return src, false, nil
	}
	return append(src, line...), true, nil
}

var ignoreURL = cmpopts.IgnoreFields(pullrequest.Info{}, "URL")

// autoMerge asks for the merge as the proposer does: again while the
// answer is retryable (Gitea checks a new pull request's mergeability in
// the background and says "try again later" meanwhile).
func autoMerge(t *testing.T, h pullrequest.Host, number int64, head string) pullrequest.AutoMerge {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		am, err := h.AutoMerge(t.Context(), number, head)
		if err == nil {
			return am
		}
		if fault.IsPermanent(err) || time.Now().After(deadline) {
			t.Fatalf("AutoMerge: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGiteaLifecycle opens a pull request (a second Open finds it), reads
// it, merges it at once with AutoMerge, and closes another one with a
// comment.
// Gitea answers 404 to opening the pull request of a branch it has not
// recorded yet (it records pushes from a queue): Open asks again, and a
// branch that never comes is still refused for good after BranchWait.
func TestGiteaOpenWaitsForThePushedBranch(t *testing.T) {
	r := newRepo(t, "queued")
	target, err := url.Parse(server.URL)
	if err != nil {
		t.Fatal(err)
	}
	var refuse atomic.Int32 // pull requests' POSTs answered 404 before passing
	refuse.Store(2)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, req *nethttp.Request) {
		if req.Method == nethttp.MethodPost && strings.HasSuffix(req.URL.Path, "/pulls") && refuse.Add(-1) >= 0 {
			nethttp.Error(w, `{"message":"not found"}`, nethttp.StatusNotFound)
			return
		}
		proxy.ServeHTTP(w, req)
	}))
	defer srv.Close()
	h := host(t, "queued", func(c *pullrequest.Config) { c.APIURL = srv.URL })
	propose(t, r, "flotilla/api-r1/1", "1.1.0")
	opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "wave 1"})
	if err != nil || opened.Number == 0 {
		t.Fatalf("Open = %+v, %v; want the pull request once Gitea has the branch", opened, err)
	}
	start := time.Now()
	_, err = h.Open(t.Context(), pullrequest.PR{Head: "flotilla/never-pushed", Base: "main", Title: "never"})
	if !fault.IsPermanent(err) {
		t.Fatalf("Open of a branch never pushed = %v, want a permanent error", err)
	}
	if took := time.Since(start); took < pullrequest.BranchWait/2 {
		t.Errorf("refused after %s, want about %s of asking again", took, pullrequest.BranchWait)
	}
}

func TestGiteaLifecycle(t *testing.T) {
	r := newRepo(t, "lifecycle")
	h := host(t, "lifecycle")
	pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")

	pr := pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "flotilla: api 1.1.0 -> wave 1", Body: "rollout api-r1"}
	opened, err := h.Open(t.Context(), pr)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	want := pullrequest.Info{Number: opened.Number, HeadRef: pr.Head, HeadSHA: pushed.Commit, State: pullrequest.Open}
	if diff := cmp.Diff(want, opened, ignoreURL); diff != "" || opened.Number == 0 {
		t.Errorf("Open (-want +got)\n%s", diff)
	}
	if want := fmt.Sprintf("%s/%s/lifecycle/pulls/%d", server.URL, giteatest.Admin, opened.Number); opened.URL != want {
		t.Errorf("URL = %q, want %q", opened.URL, want)
	}
	again, err := h.Open(t.Context(), pr)
	if err != nil || again.Number != opened.Number {
		t.Errorf("second Open = #%d, %v; want #%d found, not a new one", again.Number, err, opened.Number)
	}
	got, _, err := sdk(t).GetPullRequest(giteatest.Admin, "lifecycle", opened.Number)
	if err != nil || got.Title != pr.Title || got.Body != pr.Body {
		t.Errorf("the pull request on Gitea = %+v, %v", got, err)
	}

	if am := autoMerge(t, h, opened.Number, pushed.Commit); am.State != pullrequest.AutoMerged {
		t.Fatalf("AutoMerge = %+v; want merged at once (no required checks)", am)
	}
	merged, err := h.Get(t.Context(), opened.Number)
	if err != nil || merged.State != pullrequest.Merged || merged.MergeCommit == "" {
		t.Errorf("Get after the merge = %+v, %v; want merged with its merge commit", merged, err)
	}

	propose(t, r, "flotilla/api-r2/1", "1.2.0")
	other, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r2/1", Base: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Close(t.Context(), other.Number, "superseded by api-r3"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed, err := h.Get(t.Context(), other.Number)
	if err != nil || closed.State != pullrequest.Closed {
		t.Errorf("Get after Close = %+v, %v; want closed", closed, err)
	}
	comments, _, err := sdk(t).ListIssueComments(giteatest.Admin, "lifecycle", other.Number, gitea.ListIssueCommentOptions{})
	if err != nil || len(comments) != 1 || comments[0].Body != "superseded by api-r3" {
		t.Errorf("comments = %+v, %v; want the close's", comments, err)
	}
	if err := h.Close(t.Context(), other.Number, "again"); err != nil {
		t.Errorf("closing a closed pull request: %v, want nil", err)
	}
	reopen, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r2/1", Base: "main", Title: "t"})
	if err != nil || reopen.Number != other.Number || reopen.State != pullrequest.Closed {
		t.Errorf("Open of a closed one's branch = %+v, %v; want it found, closed", reopen, err)
	}
}

// TestGiteaAutoMergeWaitsForChecks: with a required status check, AutoMerge
// schedules the merge, and Gitea merges once the check passes.
func TestGiteaAutoMergeWaitsForChecks(t *testing.T) {
	r := newRepo(t, "checks")
	c := sdk(t)
	if _, _, err := c.CreateBranchProtection(giteatest.Admin, "checks", gitea.CreateBranchProtectionOption{
		RuleName: "main", EnableStatusCheck: true, StatusCheckContexts: []string{"ci/test"},
	}); err != nil {
		t.Fatal(err)
	}
	h := host(t, "checks")
	pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")
	opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if am := autoMerge(t, h, opened.Number, pushed.Commit); am.State != pullrequest.AutoScheduled {
		t.Fatalf("AutoMerge = %+v; want scheduled", am)
	}
	if got, err := h.Get(t.Context(), opened.Number); err != nil || got.State != pullrequest.Open {
		t.Fatalf("Get before the check = %+v, %v; want open", got, err)
	}
	if _, _, err := c.CreateStatus(giteatest.Admin, "checks", pushed.Commit, gitea.CreateStatusOption{State: gitea.StatusSuccess, Context: "ci/test"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := h.Get(t.Context(), opened.Number)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == pullrequest.Merged {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not merged 30s after the check passed: %+v", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGiteaMergeMethods: each mergeMethod makes the history it names on
// the real Gitea, the base having moved after the branch was cut: merge a
// merge commit (two parents), squash and rebase one new commit on top of
// the moved base; all three leave the proposed change on the base.
func TestGiteaMergeMethods(t *testing.T) {
	for _, method := range []string{pullrequest.MethodMerge, pullrequest.MethodSquash, pullrequest.MethodRebase} {
		t.Run(method, func(t *testing.T) {
			name := "method-" + method
			r := newRepo(t, name)
			h := host(t, name, func(c *pullrequest.Config) { c.MergeMethod = method })
			pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")
			c := sdk(t)
			moved, _, err := c.CreateFile(giteatest.Admin, name, "other.txt", gitea.CreateFileOptions{
				FileOptions: gitea.FileOptions{Message: "meanwhile on main", BranchName: "main"}, Content: "b3RoZXIK"})
			if err != nil {
				t.Fatal(err)
			}
			opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "flotilla: api 1.1.0 -> wave 1"})
			if err != nil {
				t.Fatal(err)
			}
			if am := autoMerge(t, h, opened.Number, pushed.Commit); am.State != pullrequest.AutoMerged {
				t.Fatalf("AutoMerge = %+v; want merged", am)
			}
			head, _, err := c.GetSingleCommit(giteatest.Admin, name, "main")
			if err != nil {
				t.Fatal(err)
			}
			var parents []string
			for _, p := range head.Parents {
				parents = append(parents, p.SHA)
			}
			want := map[string][]string{
				pullrequest.MethodMerge:  {moved.Commit.SHA, pushed.Commit},
				pullrequest.MethodSquash: {moved.Commit.SHA},
				pullrequest.MethodRebase: {moved.Commit.SHA},
			}[method]
			if diff := cmp.Diff(want, parents); diff != "" {
				t.Errorf("parents of main's head (-want +got)\n%s", diff)
			}
			if head.SHA == pushed.Commit {
				t.Errorf("main's head is the branch's own commit; want a new one")
			}
			readme, _, err := c.GetFile(giteatest.Admin, name, "main", "README.md")
			if err != nil || !strings.Contains(string(readme), "registry.example.com/team/api:1.1.0") {
				t.Errorf("README on main = %q, %v; want the proposed image", readme, err)
			}
		})
	}
}

// TestGiteaMergeMethodOff: a merge method the repository's settings turn
// off is refused; AutoMerge says so (after retrying as long as Gitea may
// still be checking), and the pull request stays open for a human.
func TestGiteaMergeMethodOff(t *testing.T) {
	r := newRepo(t, "squash-off")
	off := false
	if _, _, err := sdk(t).EditRepo(giteatest.Admin, "squash-off", gitea.EditRepoOption{AllowSquash: &off}); err != nil {
		t.Fatal(err)
	}
	h := host(t, "squash-off", func(c *pullrequest.Config) { c.MergeMethod = pullrequest.MethodSquash })
	pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")
	opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	am := autoMerge(t, h, opened.Number, pushed.Commit)
	want := pullrequest.AutoMerge{State: pullrequest.AutoUnsupported, Reason: "the repository does not allow squash merges (its settings)"}
	if diff := cmp.Diff(want, am); diff != "" {
		t.Errorf("AutoMerge (-want +got)\n%s", diff)
	}
	if got, err := h.Get(t.Context(), opened.Number); err != nil || got.State != pullrequest.Open {
		t.Errorf("Get = %+v, %v; want still open", got, err)
	}
}

// TestGiteaMergeConflict: a pull request that conflicts with its base
// never becomes mergeable; AutoMerge says so with an error the proposer
// retries (Gitea may still be checking), not a permanent one, and the pull
// request stays open.
func TestGiteaMergeConflict(t *testing.T) {
	r := newRepo(t, "conflict")
	h := host(t, "conflict", func(c *pullrequest.Config) { c.MergeableWait = 3 * time.Second })
	pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")
	if _, _, err := sdk(t).UpdateFile(giteatest.Admin, "conflict", "README.md", gitea.UpdateFileOptions{
		FileOptions: gitea.FileOptions{Message: "meanwhile on main", BranchName: "main"}, SHA: readmeSHA(t, "conflict"),
		Content: "Q29uZmxpY3QK"}); err != nil {
		t.Fatal(err)
	}
	opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	am, err := h.AutoMerge(t.Context(), opened.Number, pushed.Commit)
	if err == nil || fault.IsPermanent(err) || !strings.Contains(err.Error(), "conflicts with its base") {
		t.Errorf("AutoMerge = %+v, %v; want a retryable error saying it may conflict", am, err)
	}
	if got, err := h.Get(t.Context(), opened.Number); err != nil || got.State != pullrequest.Open {
		t.Errorf("Get = %+v, %v; want still open", got, err)
	}
}

// readmeSHA is the blob of README.md on main, which an update names.
func readmeSHA(t *testing.T, repo string) string {
	t.Helper()
	f, _, err := sdk(t).GetContents(giteatest.Admin, repo, "main", "README.md")
	if err != nil {
		t.Fatal(err)
	}
	return f.SHA
}

// TestGiteaLabels: labels are put by name, reviewers asked; a label the repository lacks is
// a permanent error naming it.
func TestGiteaLabels(t *testing.T) {
	r := newRepo(t, "labels")
	if _, _, err := sdk(t).CreateLabel(giteatest.Admin, "labels", gitea.CreateLabelOption{Name: "flotilla", Color: "#00aabb"}); err != nil {
		t.Fatal(err)
	}
	h := host(t, "labels")
	propose(t, r, "flotilla/a/1", "1.1.0")
	opened, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/a/1", Base: "main", Title: "t", Labels: []string{"flotilla"}, Reviewers: []string{giteatest.Reviewer}})
	if err != nil {
		t.Fatal(err)
	}
	pr, _, err := sdk(t).GetPullRequest(giteatest.Admin, "labels", opened.Number)
	if err != nil || len(pr.Labels) != 1 || pr.Labels[0].Name != "flotilla" {
		t.Errorf("labels = %+v, %v; want flotilla", pr.Labels, err)
	}
	if len(pr.RequestedReviewers) != 1 || pr.RequestedReviewers[0].UserName != giteatest.Reviewer {
		t.Errorf("requested reviewers = %+v; want %s", pr.RequestedReviewers, giteatest.Reviewer)
	}
	propose(t, r, "flotilla/b/1", "1.2.0")
	_, err = h.Open(t.Context(), pullrequest.PR{Head: "flotilla/b/1", Base: "main", Title: "t", Labels: []string{"nope"}})
	if err == nil || !fault.IsPermanent(err) {
		t.Errorf("Open with an unknown label = %v, want a permanent error", err)
	}
}

// TestGiteaErrors: a wrong token and an unknown repository are permanent.
func TestGiteaErrors(t *testing.T) {
	newRepo(t, "errors")
	for name, h := range map[string]pullrequest.Host{
		"bad token":    host(t, "errors", func(c *pullrequest.Config) { c.Token = "0000" }),
		"unknown repo": host(t, "nope"),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := h.Get(t.Context(), 1)
			if err == nil || !fault.IsPermanent(err) {
				t.Errorf("Get = %v, want a permanent error", err)
			}
		})
	}
}

// TestGiteaWebhooks has the real Gitea send its pull_request webhooks to a
// receiver here, and reads them with flotilla's gitea sender: a merge of
// one of flotilla's branches and a close of another become
// git.pullrequest events naming the rollout; a foreign branch's is ignored.
func TestGiteaWebhooks(t *testing.T) {
	r := newRepo(t, "hooks")
	deliveries := make(chan *intake.Delivery, 32)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, req *nethttp.Request) {
		body, _ := io.ReadAll(req.Body)
		deliveries <- &intake.Delivery{Receiver: "forge", Header: req.Header.Clone(), Body: body, ReceivedAt: time.Now()}
	}))
	defer srv.Close()
	const secret = "hook-s3cret"
	if _, _, err := sdk(t).CreateRepoHook(giteatest.Admin, "hooks", gitea.CreateHookOption{
		Type: gitea.HookTypeGitea, Active: true, Events: []string{"pull_request"},
		Config: map[string]string{"url": srv.URL, "content_type": "json", "secret": secret},
	}); err != nil {
		t.Fatal(err)
	}
	h := host(t, "hooks")
	sender := intake.GiteaSender{Secret: secret}
	next := func(want string) []cloudevents.Event {
		t.Helper()
		for {
			select {
			case d := <-deliveries:
				if err := sender.Authenticate(t.Context(), d); err != nil {
					t.Fatalf("authenticating Gitea's delivery: %v", err)
				}
				res, err := sender.Parse(d)
				if err != nil {
					t.Fatalf("parsing Gitea's delivery: %v\n%s", err, d.Body)
				}
				if want == "ignored" && res.Ignored != "" {
					return nil
				}
				if len(res.Events) == 1 {
					p, err := events.Decode[events.GitPullRequest](res.Events[0])
					if err != nil {
						t.Fatal(err)
					}
					if p.Action == want {
						return res.Events
					}
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s delivery from Gitea in 30s", want)
			}
		}
	}

	pushed := propose(t, r, "flotilla/api-r1/1", "1.1.0")
	pr, err := h.Open(t.Context(), pullrequest.PR{Head: "flotilla/api-r1/1", Base: "main", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	next("opened")
	autoMerge(t, h, pr.Number, pushed.Commit)
	evs := next("closed")
	got, _ := events.Decode[events.GitPullRequest](evs[0])
	merged, _ := h.Get(t.Context(), pr.Number)
	want := events.GitPullRequest{RepoURL: r.URL, Number: pr.Number, URL: merged.URL, Action: "closed", Merged: true, MergeCommit: merged.MergeCommit,
		HeadRef: "flotilla/api-r1/1", HeadSHA: pushed.Commit, BaseRef: "main", Actor: giteatest.Admin, Sender: "gitea", Receiver: "forge"}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(events.GitPullRequest{}, "DeliveryID")); diff != "" {
		t.Errorf("merged (-want +got):\n%s", diff)
	}
	if events.RolloutID(evs[0]) != "api-r1" {
		t.Errorf("rollout id = %q, want api-r1", events.RolloutID(evs[0]))
	}

	propose(t, r, "feature/x", "9.9.9")
	if _, err := h.Open(t.Context(), pullrequest.PR{Head: "feature/x", Base: "main", Title: "a human's"}); err != nil {
		t.Fatal(err)
	}
	next("ignored")
}
