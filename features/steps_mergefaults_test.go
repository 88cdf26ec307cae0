package features

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"code.gitea.io/sdk/gitea"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/pkg/testkit/giteatest"
)

// mergeFaults stands between flotilla and Gitea's API: it passes every
// request on, except the merges it is told to fail, which it answers, after
// a second (a slow host), with the 500 Gitea gives when its database is
// busy. It injects the failure; Gitea stays the real host.
type mergeFaults struct {
	srv *httptest.Server
	mu  sync.Mutex
	// fail is how many merges to fail next (-1: every one); failed counts
	// those failed.
	fail, failed int
}

// giteaAnswer is the message the failed merges carry.
const giteaAnswer = "database is locked"

var mergePath = regexp.MustCompile(`^/api/v1/repos/[^/]+/[^/]+/pulls/\d+/merge$`)

func newMergeFaults(target string) (*mergeFaults, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	f := &mergeFaults{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && mergePath.MatchString(r.URL.Path) && f.take() {
			time.Sleep(time.Second)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(map[string]string{"message": giteaAnswer, "url": u.String() + "/api/swagger"})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	return f, nil
}

// take says whether to fail this merge, counting it.
func (f *mergeFaults) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == 0 {
		return false
	}
	if f.fail > 0 {
		f.fail--
	}
	f.failed++
	return true
}

func (f *mergeFaults) set(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = n
}

func (f *mergeFaults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (s *scenario) registerMergeFaultSteps(sc *godog.ScenarioContext) {
	sc.Step(`^Gitea's API answers flotilla's first (\d+) merge requests with 500$`, func(ctx context.Context, n int) error { return s.failMerges(n) })
	sc.Step(`^Gitea's API answers every merge request from flotilla with 500$`, func(ctx context.Context) error { return s.failMerges(-1) })
	sc.Step(`^Gitea's API answers merge requests again$`, s.mergesRecover)
	sc.Step(`^flotilla asks Gitea again for "([^"]*)" after a merge fails$`, s.mergeRetryFor)
	sc.Step(`^what flotilla's rollouts wait for is watched$`, s.watchWaiting)
	sc.Step(`^Gitea answered (\d+) merge requests with 500 and merged the pull request of each wave of "([^"]*)"$`, s.mergedAfterFaults)
	sc.Step(`^while wave 1 of "([^"]*)" waited, the rollout said its pull request was open and Gitea asked to merge it, then that the merge failed with Gitea's answer and when it would ask again$`, s.saidOnTheWay)
	sc.Step("^wave 1 of the rollout of \"([^\"]*)\" says merging its pull request failed with Gitea's answer and that `flotilla retry` asks again$", s.saysMergeFailed)
	sc.Step(`^the pull request of wave 1 of "([^"]*)" is open and not merged on Gitea$`, s.openNotMerged)
}

// failMerges puts the fault proxy between flotilla and Gitea's API (before
// flotilla is configured) and fails the next n merges (-1: all).
func (s *scenario) failMerges(n int) error {
	pr, ok := s.w.gitops["pullRequest"].(map[string]any)
	if !ok || s.w.pr == nil {
		return errors.New("no pull request block: the Gitea repository step comes first")
	}
	if s.w.mergeFaults == nil {
		f, err := newMergeFaults(s.w.pr.srv.URL)
		if err != nil {
			return err
		}
		s.w.mergeFaults = f
		s.onCleanup(f.srv.Close)
		pr["apiURL"] = f.srv.URL
	}
	s.w.mergeFaults.set(n)
	return nil
}

func (s *scenario) mergesRecover() error {
	if s.w.mergeFaults == nil {
		return errors.New("no fault proxy: a step failing merges comes first")
	}
	s.w.mergeFaults.set(0)
	return nil
}

func (s *scenario) mergeRetryFor(_ context.Context, d string) error {
	pr, ok := s.w.gitops["pullRequest"].(map[string]any)
	if !ok {
		return errors.New("no pull request block: the Gitea repository step comes first")
	}
	pr["mergeRetryFor"] = d
	return nil
}

// waitingLog records, every 100 ms, each new text a rollout says it waits
// for, by rollout id, until the scenario ends.
type waitingLog struct {
	mu   sync.Mutex
	said map[string][]string
}

func (l *waitingLog) texts(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.said[id]...)
}

func (s *scenario) watchWaiting(ctx context.Context) error {
	l := &waitingLog{said: map[string][]string{}}
	s.w.waiting = l
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	s.onCleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			var ros []struct{ ID, Waiting string }
			if err := s.getJSON(ctx, "/api/v1/rollouts", &ros); err == nil {
				l.mu.Lock()
				for _, r := range ros {
					if said := l.said[r.ID]; r.Waiting != "" && (len(said) == 0 || said[len(said)-1] != r.Waiting) {
						l.said[r.ID] = append(said, r.Waiting)
					}
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return nil
}

// mergedAfterFaults: the proxy failed n merges, and Gitea (read directly)
// holds every wave's pull request merged.
func (s *scenario) mergedAfterFaults(ctx context.Context, n int, version string) error {
	if got := s.w.mergeFaults.count(); got != n {
		return fmt.Errorf("the proxy failed %d merges, want %d", got, n)
	}
	numbers, err := s.numbers(ctx, version)
	if err != nil {
		return err
	}
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	for i, number := range numbers {
		pr, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, number)
		if err != nil {
			return err
		}
		if !pr.HasMerged {
			return fmt.Errorf("the pull request of wave %d (#%d) is %s and not merged on Gitea", i+1, number, pr.State)
		}
	}
	return nil
}

// saidOnTheWay: what the rollout said it waited for went through the
// open pull request being merged, then the failure with Gitea's answer and
// the next attempt's time, in that order.
func (s *scenario) saidOnTheWay(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	said := s.w.waiting.texts(id)
	want := [][]string{
		{"wave 1 ", "waits for pull request #", "asked the host to merge it"},
		{"wave 1 ", "waits for pull request #", "merging failed (", "Gitea answered 500: " + giteaAnswer, "asking again at "},
	}
	next := 0
	for _, text := range said {
		if next < len(want) && containsAll(text, want[next]) {
			next++
		}
	}
	if next < len(want) {
		return fmt.Errorf("the rollout never said %q after the texts before it; it said, in order:\n%s", want[next], strings.Join(said, "\n"))
	}
	return nil
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// saysMergeFailed: `flotilla describe rollout` says wave 1's merge failed,
// with Gitea's answer, and how to retry it; waiting for it to say so.
func (s *scenario) saysMergeFailed(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	want := []string{"wave 1 ", "merging failed (", "Gitea answered 500: " + giteaAnswer, "`flotilla retry " + id + "` asks again"}
	var out string
	for end := time.Now().Add(2 * time.Minute); time.Now().Before(end); time.Sleep(time.Second) {
		if out, err = s.flotillaCLI(ctx, "describe", "rollout", id); err != nil {
			return err
		}
		if containsAll(out, want) {
			return nil
		}
	}
	return fmt.Errorf("describe never said %q:\n%s", want, out)
}

// openNotMerged reads the pull request of wave 1 on Gitea.
func (s *scenario) openNotMerged(ctx context.Context, version string) error {
	number, err := s.waveNumber(ctx, 1, version)
	if err != nil {
		return err
	}
	c, err := s.w.pr.client(ctx)
	if err != nil {
		return err
	}
	pr, _, err := c.GetPullRequest(giteatest.Admin, s.w.pr.repo, number)
	if err != nil {
		return err
	}
	if pr.State != gitea.StateOpen || pr.HasMerged {
		return fmt.Errorf("pull request #%d is %s (merged %t), want open and not merged", pr.Index, pr.State, pr.HasMerged)
	}
	return nil
}
