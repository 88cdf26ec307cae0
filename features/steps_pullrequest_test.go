package features

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/pkg/testkit/giteatest"
)

// The scenarios' repositories live on one real Gitea, started by the first
// scenario that needs it and stopped when the package's tests end.
var (
	giteaOnce   sync.Once
	giteaServer *giteaest
	giteaErr    error
)

// giteaest is the shared Gitea and its temporary directory.
type giteaest struct {
	*giteatest.Server
	dir string
}

func sharedGitea(ctx context.Context) (*giteatest.Server, error) {
	giteaOnce.Do(func() {
		dir, err := os.MkdirTemp("", "features-gitea-*")
		if err != nil {
			giteaErr = err
			return
		}
		srv, err := giteatest.Start(context.WithoutCancel(ctx), filepath.Join(dir, "gitea"))
		if err != nil {
			giteaErr = fmt.Errorf("starting gitea: %w", err)
			_ = os.RemoveAll(dir)
			return
		}
		giteaServer = &giteaest{Server: srv, dir: dir}
	})
	if giteaErr != nil {
		return nil, giteaErr
	}
	return giteaServer.Server, nil
}

// stopGitea stops the shared Gitea, if a scenario started it.
func stopGitea() {
	if giteaServer != nil {
		giteaServer.Stop()
		_ = os.RemoveAll(giteaServer.dir)
	}
}

// pullRequests is a scenario's Gitea repository in mode pullRequest.
type pullRequests struct {
	srv        *giteatest.Server
	repo       string // its name, owned by giteatest.Admin
	hookSecret string
}

func (p *pullRequests) client(ctx context.Context) (*gitea.Client, error) {
	return gitea.NewClient(p.srv.URL, gitea.SetToken(p.srv.Token), gitea.SetContext(ctx))
}

func (s *scenario) registerPullRequestSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application keeps its image in a Gitea repository and rolls out by pull request$`, s.giteaRepository)
	sc.Step(`^Gitea sends its pull request webhooks to flotilla$`, s.giteaWebhooks)
	sc.Step(`^version "([^"]*)" has been rolled out to every cluster by merging its pull requests$`, s.rolledOutByMerging)
	sc.Step(`^wave (\d+) of the rollout of "([^"]*)" waits for a pull request naming the version, its digest and its waves$`, s.waveWaitsForPullRequest)
	sc.Step(`^the pull request of wave (\d+) of "([^"]*)" is merged$`, s.mergePullRequest)
	sc.Step(`^the pull request of wave (\d+) of "([^"]*)" is closed without merging$`, s.closePullRequest)
	sc.Step(`^the pull requests of "([^"]*)" are merged as they open$`, s.mergeAsTheyOpen)
	sc.Step(`^the rollout of "([^"]*)" is rolled back because "([^"]*)"$`, s.rolledBackBecause)
	sc.Step(`^the Gitea repository pins version "([^"]*)" by digest for clusters "([^"]*)"$`, s.giteaPins)
	sc.Step(`^the pull requests merge themselves by "([^"]*)" once the checks main requires pass$`, s.autoMergeBy)
	sc.Step(`^version "([^"]*)" has been rolled out to every cluster by its pull requests merging themselves$`, s.rolledOutByAutoMerge)
	sc.Step(`^main requires the status check "([^"]*)" to pass before a merge$`, s.requireCheck)
	sc.Step(`^the pull request of wave (\d+) of "([^"]*)" is set to merge itself once its checks pass$`, s.autoMergeScheduled)
	sc.Step(`^the check "([^"]*)" passes on the pull request of wave (\d+) of "([^"]*)"$`, s.checkPasses)
	sc.Step(`^main took each pull request of "([^"]*)" as one squashed commit$`, s.squashed)
	sc.Step(`^the pull request of wave (\d+) of "([^"]*)" is closed with a comment naming the rollout of "([^"]*)"$`, s.closedNaming)
}

// autoMergeBy has flotilla ask Gitea to merge each pull request itself, by
// method, as soon as the checks the base branch requires pass.
func (s *scenario) autoMergeBy(_ context.Context, method string) error {
	pr, ok := s.w.gitops["pullRequest"].(map[string]any)
	if !ok {
		return errors.New("no pull request block: the Gitea repository step comes first")
	}
	pr["autoMerge"], pr["mergeMethod"] = true, method
	return nil
}

func (s *scenario) rolledOutByAutoMerge(ctx context.Context, version string) error {
	if err := s.pushVersion(ctx, version); err != nil {
		return err
	}
	if err := s.rolloutSucceeds(ctx, version); err != nil {
		return err
	}
	return s.primariesRun(ctx, version)
}

// requireCheck protects main: nothing merges before the check passes.
func (s *scenario) requireCheck(ctx context.Context, check string) error {
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	_, _, err = c.CreateBranchProtection(giteatest.Admin, s.w.pr.repo, gitea.CreateBranchProtectionOption{
		RuleName: "main", EnableStatusCheck: true, StatusCheckContexts: []string{check},
	})
	return err
}

// autoMergeScheduled: the pull request is open, unmerged (its check has
// not run), and the rollout says Gitea will merge it.
func (s *scenario) autoMergeScheduled(ctx context.Context, wave int, version string) error {
	pr, err := s.openPullRequest(ctx, wave, version)
	if err != nil {
		return err
	}
	if pr.HasMerged || pr.State != gitea.StateOpen {
		return fmt.Errorf("pull request #%d is %s (merged %t) before its check passed", pr.Index, pr.State, pr.HasMerged)
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	// The merge is asked for after the pull request opened: wait for
	// Gitea's answer.
	want := fmt.Sprintf("#%d", pr.Index)
	var ro struct{ Waiting string }
	for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
			return err
		}
		if strings.Contains(ro.Waiting, want) && strings.Contains(ro.Waiting, "auto-merge: scheduled") {
			break
		}
		if time.Now().After(end) {
			return fmt.Errorf("the rollout waits for %q; want %s with its auto-merge scheduled", ro.Waiting, want)
		}
	}
	// Scheduled, and still not merged on Gitea: its check has not run.
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	now, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, pr.Index)
	if err != nil {
		return err
	}
	if now.HasMerged || now.State != gitea.StateOpen {
		return fmt.Errorf("pull request #%d is %s (merged %t) before its check passed", now.Index, now.State, now.HasMerged)
	}
	return nil
}

// checkPasses reports the check as passed on the pull request's head, as
// a CI system would.
func (s *scenario) checkPasses(ctx context.Context, check string, wave int, version string) error {
	c, pr, err := s.reviewer(ctx, wave, version)
	if err != nil {
		return err
	}
	_, _, err = c.CreateStatus(giteatest.Admin, s.w.pr.repo, pr.Head.Sha, gitea.CreateStatusOption{
		State: gitea.StatusSuccess, Context: check, Description: "passed"})
	return err
}

// numbers returns the pull request number of each wave of the version's
// rollout, from flotilla's API.
func (s *scenario) numbers(ctx context.Context, version string) ([]int64, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return nil, err
	}
	var ro struct {
		Waves []struct{ PullRequest *struct{ Number int64 } }
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return nil, err
	}
	var out []int64
	for i, w := range ro.Waves {
		if w.PullRequest == nil || w.PullRequest.Number == 0 {
			return nil, fmt.Errorf("wave %d of %s records no pull request", i+1, id)
		}
		out = append(out, w.PullRequest.Number)
	}
	return out, nil
}

// squashed: main's newest commits are one per wave's pull request, in
// wave order, each with a single parent (no merge commit).
func (s *scenario) squashed(ctx context.Context, version string) error {
	numbers, err := s.numbers(ctx, version)
	if err != nil {
		return err
	}
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	commits, _, err := c.ListRepoCommits(giteatest.Admin, s.w.pr.repo, gitea.ListCommitOptions{SHA: "main", ListOptions: gitea.ListOptions{PageSize: len(numbers)}})
	if err != nil {
		return err
	}
	if len(commits) < len(numbers) {
		return fmt.Errorf("main has %d commits, want at least %d", len(commits), len(numbers))
	}
	for i, n := range numbers {
		cm := commits[len(numbers)-1-i] // newest first
		if len(cm.Parents) != 1 || !strings.Contains(cm.RepoCommit.Message, fmt.Sprintf("(#%d)", n)) {
			return fmt.Errorf("commit %.12s on main has %d parents and says %q; want pull request #%d squashed into one commit",
				cm.SHA, len(cm.Parents), cm.RepoCommit.Message, n)
		}
	}
	return nil
}

// waveNumber is the number of the pull request wave (from 1) of the
// version's rollout records.
func (s *scenario) waveNumber(ctx context.Context, wave int, version string) (int64, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return 0, err
	}
	var ro struct {
		Waves []struct{ PullRequest *struct{ Number int64 } }
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return 0, err
	}
	if wave < 1 || wave > len(ro.Waves) || ro.Waves[wave-1].PullRequest == nil || ro.Waves[wave-1].PullRequest.Number == 0 {
		return 0, fmt.Errorf("wave %d of %s records no pull request", wave, id)
	}
	return ro.Waves[wave-1].PullRequest.Number, nil
}

// closedNaming: flotilla closed the pull request of the superseded
// rollout, saying which rollout took over.
func (s *scenario) closedNaming(ctx context.Context, wave int, version, by string) error {
	number, err := s.waveNumber(ctx, wave, version)
	if err != nil {
		return err
	}
	byID, err := s.rolloutID(ctx, by)
	if err != nil {
		return err
	}
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pr, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, number)
		if err != nil {
			return err
		}
		comments, _, err := c.ListIssueComments(giteatest.Admin, s.w.pr.repo, number, gitea.ListIssueCommentOptions{})
		if err != nil {
			return err
		}
		var said []string
		for _, cm := range comments {
			said = append(said, cm.Body)
		}
		if pr.State == gitea.StateClosed && !pr.HasMerged && strings.Contains(strings.Join(said, "\n"), byID) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pull request #%d is %s (merged %t), comments %q; want closed unmerged, naming %s", number, pr.State, pr.HasMerged, said, byID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// giteaRepository makes a repository on the shared Gitea holding one
// kustomize overlay per fleet cluster, and configures the application to
// keep its image there, by pull request, polling every 10s.
// pullRequestScenarios lets one pull-request scenario at a time use the
// shared Gitea: on SQLite, several opening and merging pull requests at
// once on a loaded 2-core machine made it take a minute to open one and
// then stop answering merges (CI, 2026-12-02: every wait of the
// scenarios in flight ran out).
var pullRequestScenarios = newExclusive()

func (s *scenario) giteaRepository(ctx context.Context) error {
	if err := s.take(ctx, pullRequestScenarios, "the shared Gitea"); err != nil {
		return err
	}
	srv, err := sharedGitea(ctx)
	if err != nil {
		return err
	}
	p := &pullRequests{srv: srv, repo: "deploy-" + randomHex(4), hookSecret: randomHex(16)}
	c, err := p.client(ctx)
	if err != nil {
		return err
	}
	s.keepGiteaLog(srv.LogPath())
	if _, _, err := c.CreateRepo(gitea.CreateRepoOption{Name: p.repo, DefaultBranch: "main"}); err != nil {
		return fmt.Errorf("creating the repository on gitea: %w", err)
	}
	work := filepath.Join(s.w.dir, "seed")
	remote := p.authURL()
	if _, err := git(ctx, s.w.dir, "init", "--initial-branch=main", work); err != nil {
		return err
	}
	for _, cl := range []string{"c1", "c2", "c3", "c4"} {
		dir := filepath.Join(work, "clusters", cl, "podinfo")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		body := fmt.Sprintf(seedKustomization, cl, s.w.regHost+"/demo/podinfo")
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"add", "."}, {"commit", "-m", "seed"}, {"push", remote, "main"}} {
		if _, err := git(ctx, work, args...); err != nil {
			return err
		}
	}
	tokenFile := filepath.Join(s.w.dir, "gitea.token")
	if err := os.WriteFile(tokenFile, []byte(srv.Token+"\n"), 0o600); err != nil {
		return err
	}
	s.w.pr = p
	s.w.repoDir = remote // what the gitops steps clone
	s.w.gitops = map[string]any{
		"url": srv.RepoURL(giteatest.Admin, p.repo), "branch": "main", "paths": []string{"clusters/{cluster}/podinfo/kustomization.yaml"},
		"username": giteatest.Admin, "token": map[string]string{"file": tokenFile},
		"mode": "pullRequest",
		"pullRequest": map[string]any{
			"host": "gitea", "apiURL": srv.URL, "repository": giteatest.Admin + "/" + p.repo,
			"labels": []string{}, "pollInterval": "10s", "mergeDeadline": "10m",
		},
	}
	return nil
}

// keepGiteaLog keeps, when the scenario fails, what the shared Gitea
// logged while it ran (other scenarios' requests too) with the scenario's
// files, and prints its errors.
func (s *scenario) keepGiteaLog(path string) {
	var from int64
	if st, err := os.Stat(path); err == nil {
		from = st.Size()
	}
	dir := s.w.dir
	s.onCleanup(func() {
		if !s.failed {
			return
		}
		b, err := os.ReadFile(path)
		if err != nil || int64(len(b)) < from {
			return
		}
		kept := filepath.Join(dir, "gitea.log")
		if err := os.WriteFile(kept, b[from:], 0o644); err != nil {
			return
		}
		var errs []string
		for _, line := range strings.Split(string(b[from:]), "\n") {
			if strings.Contains(line, " [E] ") || strings.Contains(line, " 500 ") {
				errs = append(errs, line)
			}
		}
		fmt.Fprintf(os.Stderr, "gitea's log of the scenario kept in %s; its errors (%d):\n%s\n", kept, len(errs), strings.Join(errs[max(0, len(errs)-20):], "\n"))
	})
}

// authURL is the repository's URL with the token, for the git command.
func (p *pullRequests) authURL() string {
	u, _ := url.Parse(p.srv.RepoURL(giteatest.Admin, p.repo))
	u.User = url.UserPassword(giteatest.Admin, p.srv.Token)
	return u.String()
}

// giteaWebhooks has Gitea send the repository's pull request events to
// flotilla's gitea receiver.
func (s *scenario) giteaWebhooks(ctx context.Context) error {
	p := s.w.pr
	c, err := p.client(ctx)
	if err != nil {
		return err
	}
	_, _, err = c.CreateRepoHook(giteatest.Admin, p.repo, gitea.CreateHookOption{
		Type: gitea.HookTypeGitea, Active: true, Events: []string{"pull_request"},
		Config: map[string]string{"url": "http://" + s.w.flotilla.listen + "/hooks/gitea", "content_type": "json", "secret": p.hookSecret},
	})
	return err
}

// openPullRequest waits until wave's pull request of the version's rollout
// is open (flotilla's describe says so) and returns it.
func (s *scenario) openPullRequest(ctx context.Context, wave int, version string) (*gitea.PullRequest, error) {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		var ro struct {
			Waiting string
			Waves   []struct {
				PullRequest *struct {
					State  string
					Number int64
				}
			}
		}
		if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
			return nil, err
		}
		last = ro.Waiting
		if wave <= len(ro.Waves) {
			if pr := ro.Waves[wave-1].PullRequest; pr != nil && pr.State == "Open" && strings.Contains(ro.Waiting, fmt.Sprintf("waits for pull request #%d", pr.Number)) {
				c, err := s.w.pr.client(ctx)
				if err != nil {
					return nil, err
				}
				got, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, pr.Number)
				return got, err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, fmt.Errorf("wave %d of the rollout of %s waits for no open pull request (waiting: %q)", wave, version, last)
}

func (s *scenario) waveWaitsForPullRequest(ctx context.Context, wave int, version string) error {
	pr, err := s.openPullRequest(ctx, wave, version)
	if err != nil {
		return err
	}
	id, _ := s.rolloutID(ctx, version)
	want := []string{id, version, s.w.digests[version], "c1", fmt.Sprintf("flotilla/%s/%d", id, wave)}
	for _, w := range want {
		if !strings.Contains(pr.Title+"\n"+pr.Body+"\n"+pr.Head.Ref, w) {
			return fmt.Errorf("pull request #%d does not name %q:\n%s\n%s", pr.Index, w, pr.Title, pr.Body)
		}
	}
	// Nothing of the wave started: its clusters wait for the merge.
	var ro struct {
		Waves []struct {
			Clusters []struct{ Name, Phase string }
		}
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	for _, c := range ro.Waves[wave-1].Clusters {
		if c.Phase != "Pending" {
			return fmt.Errorf("cluster %s of wave %d is %s before the merge, want Pending", c.Name, wave, c.Phase)
		}
	}
	return nil
}

// reviewer is the open pull request of wave of the version's rollout, and
// a Gitea client to act on it as a reviewer.
func (s *scenario) reviewer(ctx context.Context, wave int, version string) (*gitea.Client, *gitea.PullRequest, error) {
	pr, err := s.openPullRequest(ctx, wave, version)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.w.pr.client(ctx)
	return c, pr, err
}

func (s *scenario) mergePullRequest(ctx context.Context, wave int, version string) error {
	c, pr, err := s.reviewer(ctx, wave, version)
	if err != nil {
		return err
	}
	// Gitea checks a new pull request's mergeability in the background and
	// answers 405 ("try again later") meanwhile, as it would a reviewer.
	// On a loaded machine it has also answered a merge with success and
	// left the pull request open: then the reviewer merges again.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok, resp, err := c.MergePullRequest(giteatest.Admin, s.w.pr.repo, pr.Index, gitea.MergePullRequestOption{Style: gitea.MergeStyleMerge})
		if err != nil {
			return fmt.Errorf("merging #%d: %w", pr.Index, err)
		}
		if ok {
			merged, state, err := s.mergeTook(c, pr.Index)
			if err != nil || merged {
				return err
			}
			if state != gitea.StateOpen || time.Now().After(deadline) {
				return fmt.Errorf("gitea answered the merge of #%d with success, yet it is %s and not merged", pr.Index, state)
			}
			continue
		}
		// The SDK reads no body of a refusal: its status says enough.
		if now, _, gerr := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, pr.Index); gerr == nil && now.HasMerged {
			return nil // an earlier answer's merge took meanwhile
		}
		if resp == nil || resp.StatusCode != http.StatusMethodNotAllowed || time.Now().After(deadline) {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			return fmt.Errorf("merging #%d: gitea answered %d", pr.Index, status)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// mergeTook waits up to 20 s for Gitea to report pull request index merged;
// else it returns its state.
func (s *scenario) mergeTook(c *gitea.Client, index int64) (bool, gitea.StateType, error) {
	var state gitea.StateType
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		pr, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, index)
		if err != nil {
			return false, "", fmt.Errorf("reading #%d after its merge: %w", index, err)
		}
		if pr.HasMerged {
			return true, pr.State, nil
		}
		state = pr.State
	}
	return false, state, nil
}

func (s *scenario) closePullRequest(ctx context.Context, wave int, version string) error {
	c, pr, err := s.reviewer(ctx, wave, version)
	if err != nil {
		return err
	}
	closed := gitea.StateClosed
	_, _, err = c.EditPullRequest(giteatest.Admin, s.w.pr.repo, pr.Index, gitea.EditPullRequestOption{State: &closed})
	return err
}

// mergeAsTheyOpen merges the pull request of each wave as it opens, until
// the rollout ends or a wave is reached that no longer opens one.
func (s *scenario) mergeAsTheyOpen(ctx context.Context, version string) error {
	for wave := 1; wave <= len(s.w.waves); wave++ {
		if err := s.mergePullRequest(ctx, wave, version); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) rolledOutByMerging(ctx context.Context, version string) error {
	if err := s.pushVersion(ctx, version); err != nil {
		return err
	}
	if err := s.mergeAsTheyOpen(ctx, version); err != nil {
		return err
	}
	if err := s.rolloutSucceeds(ctx, version); err != nil {
		return err
	}
	return s.primariesRun(ctx, version)
}

func (s *scenario) rolledBackBecause(ctx context.Context, version, reason string) error {
	if err := s.rolloutRolledBack(ctx, version); err != nil {
		return err
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	var ro struct{ Reason string }
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return err
	}
	if !strings.Contains(ro.Reason, reason) {
		return fmt.Errorf("rollout %s was rolled back because %q, want %q", id, ro.Reason, reason)
	}
	return nil
}

// giteaPins checks the repository's main branch, waiting: a revert pull
// request merges after the rollback's live reverts, and Gitea may answer
// a merge slowly, or with a conflict the proposer retries after cutting
// the branch again, when the machine is loaded (make test runs packages
// side by side).
func (s *scenario) giteaPins(ctx context.Context, version, clusters string) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := s.repositoryPins(ctx, version, clusters)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(time.Second)
	}
}
