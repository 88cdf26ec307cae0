package proposer_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/gitops/proposer"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// recordingHost plays a git host: it records the calls and answers what
// the test programs (failures included). The real hosts are tested against
// a real Gitea in pkg/gitops/pullrequest and the features.
type recordingHost struct {
	mu     sync.Mutex
	calls  []string
	opened []pullrequest.PR
	state  pullrequest.State
	merge  string
	auto   pullrequest.AutoMerge
	err    error
	// autoErr is AutoMerge's error (a host failing to merge).
	autoErr error
}

func (h *recordingHost) record(call string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, call)
	return h.err
}

func (h *recordingHost) info() pullrequest.Info {
	return pullrequest.Info{Number: 7, URL: "https://git.test/pulls/7", HeadRef: "b", HeadSHA: "head", State: h.state, MergeCommit: h.merge}
}

func (h *recordingHost) Open(_ context.Context, p pullrequest.PR) (pullrequest.Info, error) {
	h.opened = append(h.opened, p)
	return h.info(), h.record("open " + p.Head)
}
func (h *recordingHost) Get(context.Context, int64) (pullrequest.Info, error) {
	return h.info(), h.record("get")
}
func (h *recordingHost) AutoMerge(context.Context, int64, string) (pullrequest.AutoMerge, error) {
	if h.auto.State == pullrequest.AutoMerged {
		h.state, h.merge = pullrequest.Merged, "m"
	}
	if err := h.record("automerge"); err != nil {
		return pullrequest.AutoMerge{}, err
	}
	return h.auto, h.autoErr
}
func (h *recordingHost) Close(_ context.Context, _ int64, comment string) error {
	return h.record("close: " + comment)
}

// rolloutsOf answers one rollout.
type rolloutsOf rollout.Rollout

func (r rolloutsOf) Get(_ context.Context, id string) (rollout.Rollout, error) {
	if id != r.ID {
		return rollout.Rollout{}, rollout.ErrNotFound
	}
	return rollout.Rollout(r), nil
}

const (
	rolloutID = "shop-1"
	image     = "registry.test/team/shop"
)

var prDigest = "sha256:" + strings.Repeat("a", 64)

const values = "image:\n  repository: registry.test/team/shop\n  tag: \"1.0.0\"\n"

func prSetup(t *testing.T, host *recordingHost, change func(*rollout.Rollout), configure ...func(*config.Application)) (*proposer.Proposer, string) {
	t.Helper()
	url := gittest.NewRepo(t, map[string]string{"clusters/c1/values.yaml": values, "clusters/c2/values.yaml": values})
	a := app()
	a.GitOps = &config.GitOps{URL: url, Branch: "main", Paths: []string{"clusters/{cluster}/values.yaml"}, Edit: "helm",
		Mode: config.GitOpsModePullRequest, PullRequest: &config.PullRequest{Host: "gitea", APIURL: "https://git.test", Repository: "o/r",
			MergeMethod: "merge", Revert: "pullRequest", MergeDeadline: &config.Duration{Duration: time.Hour}, PollInterval: &config.Duration{Duration: time.Minute},
			Labels: []string{"flotilla"}}}
	for _, c := range configure {
		c(&a)
	}
	ro := rollout.Rollout{ID: rolloutID, Application: "shop", Image: image, Tag: "1.2.3", Digest: prDigest, Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}, {Name: "c2", Phase: rollout.ClusterPending}}}}}
	if change != nil {
		change(&ro)
	}
	p := proposer.New(&config.Config{Applications: []config.Application{a}}, rolloutsOf(ro), func(config.Application) (pullrequest.Host, error) { return host, nil }, nil)
	return p, url
}

func prRequest(t *testing.T, req events.PullRequestRequested) cloudevents.Event {
	t.Helper()
	req.RolloutID, req.Application = rolloutID, "shop"
	if req.Deadline.IsZero() {
		req.Deadline = time.Now().Add(time.Hour)
	}
	e, err := events.New("prq", events.Source, events.TypePullRequestRequested, req)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

// statusOf returns the status among evs, and the next read's due time.
func statusOf(t *testing.T, evs []cloudevents.Event) (events.PullRequestStatus, time.Time) {
	t.Helper()
	var st events.PullRequestStatus
	var next time.Time
	for _, e := range evs {
		switch e.Type() {
		case events.TypePullRequestStatus:
			var err error
			if st, err = events.Decode[events.PullRequestStatus](e); err != nil {
				t.Fatal(err)
			}
		case events.TypePullRequestRequested:
			next, _ = events.Due(e)
		default:
			t.Errorf("emitted %s", e.Type())
		}
	}
	return st, next
}

// open pushes the wave's branch with both clusters' files, opens the pull
// request with its title, body and labels, and polls.
func TestProposerOpens(t *testing.T) {
	host := &recordingHost{state: pullrequest.Open}
	p, url := prSetup(t, host, nil)
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestOpen}))
	if err != nil {
		t.Fatal(err)
	}
	st, next := statusOf(t, evs)
	want := events.PullRequestStatus{RolloutID: rolloutID, Purpose: events.PurposeApply, Number: 7, URL: "https://git.test/pulls/7",
		Branch: "flotilla/" + rolloutID + "/1", Head: "head", State: events.PullRequestOpened}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if next.IsZero() {
		t.Error("no next read scheduled")
	}
	if len(host.opened) != 1 || len(host.calls) != 1 {
		t.Fatalf("opened %d pull requests, calls %q; want one open and no merge (autoMerge off)", len(host.opened), host.calls)
	}
	pr := host.opened[0]
	if pr.Base != "main" || pr.Head != want.Branch || !strings.Contains(pr.Title, "shop 1.2.3 -> wave 1 (canary)") ||
		!strings.Contains(pr.Body, prDigest) || !strings.Contains(pr.Body, "c1, c2") || len(pr.Labels) != 1 {
		t.Errorf("pull request = %+v", pr)
	}
	held, _, err := gitops.Holds(t.Context(), gitops.Repo{URL: url, Branch: want.Branch}, []gitops.Change{{
		Image: gitops.Image{Repository: image, Tag: "1.2.3", Digest: prDigest},
		Files: []gitops.File{{Path: "clusters/c1/values.yaml", Edit: gitops.HelmValues{}}, {Path: "clusters/c2/values.yaml", Edit: gitops.HelmValues{}}},
	}})
	if err != nil || !held {
		t.Errorf("the branch holds the image: %v, %v", held, err)
	}
	if held, _, _ := gitops.Holds(t.Context(), gitops.Repo{URL: url, Branch: "main"}, []gitops.Change{{
		Image: gitops.Image{Repository: image, Tag: "1.2.3", Digest: prDigest}, Files: []gitops.File{{Path: "clusters/c1/values.yaml", Edit: gitops.HelmValues{}}},
	}}); held {
		t.Error("main changed: the base must wait for the merge")
	}
}

// A read of a merged pull request verifies the base: the image is not on
// main (the test's host says merged without merging), so Verified is false
// and the error says so.
func TestProposerVerifiesTheMerge(t *testing.T) {
	host := &recordingHost{state: pullrequest.Merged, merge: "m"}
	p, _ := prSetup(t, host, func(r *rollout.Rollout) {
		r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 7}
	})
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestRead, Number: 7, Seq: 1}))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := statusOf(t, evs)
	if st.State != events.PullRequestMerged || st.Verified || !strings.Contains(st.Error, "does not hold") {
		t.Errorf("status = %+v; want merged, not verified", st)
	}
}

// Failures: a permanent one is reported at once; a transient one is
// retried (returned) until the deadline, then reported.
func TestProposerFailures(t *testing.T) {
	for _, tt := range []struct {
		name     string
		err      error
		deadline time.Time
		retried  bool
	}{
		{"permanent", fault.Permanent(errors.New("401 bad credentials")), time.Now().Add(time.Hour), false},
		{"transient", errors.New("502 bad gateway"), time.Now().Add(time.Hour), true},
		{"transient past the deadline", errors.New("502 bad gateway"), time.Now().Add(-time.Second), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host := &recordingHost{state: pullrequest.Open, err: tt.err}
			p, _ := prSetup(t, host, nil)
			evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestOpen, Deadline: tt.deadline}))
			if tt.retried {
				if err == nil {
					t.Fatalf("Handle = %d events, nil; want the error, to retry", len(evs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, _ := statusOf(t, evs)
			if st.State != events.PullRequestFailed || !strings.Contains(st.Error, tt.err.Error()) {
				t.Errorf("status = %+v; want failed with the error", st)
			}
		})
	}
}

// A wave that no longer waits (the rollout failed) gets its pull request
// closed with a comment, and no status.
func TestProposerClosesWhatNoLongerWaits(t *testing.T) {
	host := &recordingHost{state: pullrequest.Open}
	p, _ := prSetup(t, host, func(r *rollout.Rollout) {
		r.Phase = rollout.Superseded
		r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 7}
	})
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestRead, Number: 7, Seq: 1}))
	if err != nil || len(evs) != 0 {
		t.Fatalf("Handle = %d events, %v; want none", len(evs), err)
	}
	if len(host.calls) != 1 || !strings.HasPrefix(host.calls[0], "close: flotilla: rollout "+rolloutID) {
		t.Errorf("calls = %q; want the close", host.calls)
	}
}

// A request to open the pull request of a rollout superseded meanwhile
// pushes and opens nothing.
func TestProposerOpensNothingForAnEndedRollout(t *testing.T) {
	host := &recordingHost{state: pullrequest.Open}
	p, _ := prSetup(t, host, func(r *rollout.Rollout) { r.Phase = rollout.Superseded })
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestOpen}))
	if err != nil || len(evs) != 0 || len(host.calls) != 0 {
		t.Errorf("Handle = %d events, %v, calls %q; want nothing", len(evs), err, host.calls)
	}
}

// op close (launch asks when the rollout ended) closes the pull request
// with the reason in its comment and reports it closed by flotilla.
func TestProposerClosesOnRequest(t *testing.T) {
	host := &recordingHost{state: pullrequest.Open}
	p, _ := prSetup(t, host, func(r *rollout.Rollout) {
		r.Phase = rollout.Superseded
		r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 7}
	})
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestClose,
		Number: 7, Reason: "superseded by 1.3.0 (shop-2)"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"close: flotilla: rollout " + rolloutID + " no longer waits for this pull request (superseded by 1.3.0 (shop-2)); closing it."}
	if diff := cmp.Diff(want, host.calls); diff != "" {
		t.Errorf("host calls (-want +got)\n%s", diff)
	}
	st, next := statusOf(t, evs)
	wantSt := events.PullRequestStatus{RolloutID: rolloutID, Wave: 0, Purpose: events.PurposeApply, Number: 7,
		Branch: proposer.Branch(rolloutID, 0, events.PurposeApply), State: events.PullRequestClosed, Actor: "flotilla"}
	if diff := cmp.Diff(wantSt, st); diff != "" || !next.IsZero() {
		t.Errorf("status (-want +got)\n%s (next read %v)", diff, next)
	}
}

// A host's webhook about one of flotilla's pull requests reads it; about
// another branch, nothing.
func TestProposerHint(t *testing.T) {
	host := &recordingHost{state: pullrequest.Closed}
	p, _ := prSetup(t, host, func(r *rollout.Rollout) {
		r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 7}
	})
	hint := func(head string) cloudevents.Event {
		e, err := events.New("hint-"+head, "/hooks/gitea", events.TypeGitPullRequest, events.GitPullRequest{RepoURL: "u", Number: 7, Action: "closed", HeadRef: head})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	evs, err := p.Handle(t.Context(), hint("feature/x"))
	if err != nil || len(evs) != 0 || len(host.calls) != 0 {
		t.Fatalf("a foreign branch: %d events, %v, calls %q", len(evs), err, host.calls)
	}
	evs, err = p.Handle(t.Context(), hint(proposer.Branch(rolloutID, 0, events.PurposeApply)))
	if err != nil {
		t.Fatal(err)
	}
	if st, next := statusOf(t, evs); st.State != events.PullRequestClosed || !next.IsZero() {
		t.Errorf("status = %+v (next read %v); want closed, no poll", st, next)
	}
}

func TestBranchNames(t *testing.T) {
	for _, tt := range []struct {
		id      string
		wave    int
		purpose string
	}{{"shop-1a2b", 0, events.PurposeApply}, {"a-b-c", 11, events.PurposeRevert}} {
		b := proposer.Branch(tt.id, tt.wave, tt.purpose)
		id, wave, purpose, ok := proposer.ParseBranch(b)
		if !ok || id != tt.id || wave != tt.wave || purpose != tt.purpose {
			t.Errorf("ParseBranch(%q) = %q %d %q %v", b, id, wave, purpose, ok)
		}
	}
	for _, b := range []string{"main", "flotilla/", "flotilla/x", "flotilla/x/0", "flotilla/x/y"} {
		if _, _, _, ok := proposer.ParseBranch(b); ok {
			t.Errorf("ParseBranch(%q) ok, want not flotilla's", b)
		}
	}
}

// With autoMerge, the proposer opens the pull request, says so, and asks
// for the merge as a step of its own (without autoMerge it never asks:
// TestProposerOpens).
func TestProposerAutoMerge(t *testing.T) {
	host := &recordingHost{state: pullrequest.Open}
	p, _ := prSetup(t, host, nil, func(a *config.Application) { a.GitOps.PullRequest.AutoMerge = true })
	evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestOpen}))
	if err != nil {
		t.Fatal(err)
	}
	var merge []events.PullRequestRequested
	var rest []cloudevents.Event
	for _, e := range evs {
		if req, err := events.Decode[events.PullRequestRequested](e); err == nil && req.Op == events.PullRequestMerge {
			if _, due := events.Due(e); due {
				t.Errorf("the merge is asked for later, want at once")
			}
			merge = append(merge, req)
			continue
		}
		rest = append(rest, e)
	}
	st, next := statusOf(t, rest)
	if st.State != events.PullRequestOpened || st.AutoMerge != events.MergeAsked || st.Head != "head" || next.IsZero() {
		t.Errorf("status = %+v (next read %v); want open, merge asked, head, polled", st, next)
	}
	if len(merge) != 1 || merge[0].Number != 7 || merge[0].Head != "head" || merge[0].Attempt != 1 || merge[0].Since.IsZero() {
		t.Errorf("merge requests = %+v; want one for #7 at its head, attempt 1", merge)
	}
	if diff := cmp.Diff([]string{"open flotilla/" + rolloutID + "/1"}, host.calls); diff != "" {
		t.Errorf("calls (-want +got)\n%s", diff)
	}
}

// The merge step reports what the host did; an error is told with the
// host's words and asked again with back-off until mergeRetryFor has
// passed since the first attempt, then (or at once for a permanent
// error) it waits for a user's retry.
func TestProposerMerge(t *testing.T) {
	failing := errors.New("merging pull request #7: Gitea answered 500: database is locked")
	for _, tt := range []struct {
		name     string
		auto     pullrequest.AutoMerge
		err      error
		recorded rollout.PullRequestState
		attempt  int
		since    time.Duration // before now
		// want
		state, merge string
		next         time.Duration // the next attempt's, after now (0: none)
		calls        []string
	}{
		{name: "scheduled", auto: pullrequest.AutoMerge{State: pullrequest.AutoScheduled}, recorded: rollout.PullRequestOpen,
			state: events.PullRequestOpened, merge: events.MergeScheduled, calls: []string{"automerge"}},
		{name: "unsupported", auto: pullrequest.AutoMerge{State: pullrequest.AutoUnsupported, Reason: "squash is off"}, recorded: rollout.PullRequestOpen,
			state: events.PullRequestOpened, merge: "unsupported: squash is off", calls: []string{"automerge"}},
		{name: "before launch recorded the opening", auto: pullrequest.AutoMerge{State: pullrequest.AutoScheduled}, recorded: rollout.PullRequestRequested,
			state: events.PullRequestOpened, merge: events.MergeScheduled, calls: []string{"automerge"}},
		{name: "merged at once", auto: pullrequest.AutoMerge{State: pullrequest.AutoMerged}, recorded: rollout.PullRequestOpen,
			state: events.PullRequestMerged, merge: events.MergeMerged, calls: []string{"automerge", "get"}},
		{name: "failing", err: failing, recorded: rollout.PullRequestOpen, attempt: 1,
			state: events.PullRequestOpened, merge: events.MergeFailing, next: 2 * time.Second, calls: []string{"automerge"}},
		{name: "failing, backing off", err: failing, recorded: rollout.PullRequestOpen, attempt: 4, since: time.Minute,
			state: events.PullRequestOpened, merge: events.MergeFailing, next: 16 * time.Second, calls: []string{"automerge"}},
		{name: "backing off at most 30s", err: failing, recorded: rollout.PullRequestOpen, attempt: 9, since: time.Minute,
			state: events.PullRequestOpened, merge: events.MergeFailing, next: 30 * time.Second, calls: []string{"automerge"}},
		{name: "failed past mergeRetryFor", err: failing, recorded: rollout.PullRequestOpen, attempt: 9, since: 5 * time.Minute,
			state: events.PullRequestOpened, merge: events.MergeFailed, calls: []string{"automerge"}},
		{name: "failed for good", err: fault.Permanent(errors.New("merging pull request #7: Gitea answered 403: forbidden")), recorded: rollout.PullRequestOpen, attempt: 1,
			state: events.PullRequestOpened, merge: events.MergeFailed, calls: []string{"automerge"}},
		{name: "closed meanwhile", auto: pullrequest.AutoMerge{State: pullrequest.AutoScheduled}, recorded: rollout.PullRequestClosed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			host := &recordingHost{state: pullrequest.Open, auto: tt.auto, autoErr: tt.err}
			p, _ := prSetup(t, host, func(r *rollout.Rollout) {
				r.Waves[0].PullRequest = &rollout.PullRequest{State: tt.recorded, Number: 7}
			}, func(a *config.Application) {
				a.GitOps.PullRequest.AutoMerge = true
				a.GitOps.PullRequest.MergeRetryFor = &config.Duration{Duration: 5 * time.Minute}
			})
			now := time.Now().UTC()
			evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestMerge,
				Number: 7, Head: "head", Attempt: max(tt.attempt, 1), Since: now.Add(-tt.since)}))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.calls, host.calls); diff != "" {
				t.Errorf("calls (-want +got)\n%s", diff)
			}
			if tt.state == "" {
				if len(evs) != 0 {
					t.Errorf("emitted %d events, want none", len(evs))
				}
				return
			}
			st, next := statusOf(t, evs)
			if st.State != tt.state || st.AutoMerge != tt.merge || st.Number != 7 {
				t.Errorf("status = %+v; want %s, merge %q, #7", st, tt.state, tt.merge)
			}
			if tt.err != nil && st.MergeError != tt.err.Error() {
				t.Errorf("merge error = %q, want the host's %q", st.MergeError, tt.err)
			}
			if tt.next == 0 {
				if !next.IsZero() || !st.NextMerge.IsZero() {
					t.Errorf("next attempt at %v (told %v), want none", next, st.NextMerge)
				}
				return
			}
			if d := next.Sub(now); d < tt.next || d > tt.next+5*time.Second || !next.Equal(st.NextMerge) {
				t.Errorf("next attempt in %v (told %v), want %v", d, st.NextMerge, tt.next)
			}
		})
	}
}

// app is the application the proposer's tests propose for; prSetup gives
// it its GitOps settings.
func app() config.Application {
	return config.Application{
		Name: "shop", Image: image, Namespace: "web",
		Workload: config.Workload{Kind: "Deployment", Name: "shop-api", Container: "api"},
		Service:  config.Service{Port: 8080},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Interval: config.Duration{Duration: time.Second}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
		},
	}
}
