package launch_test

import (
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
)

// prApp is app() in gitops mode pullRequest, with a merge deadline of 1h.
func prApp() config.Application {
	a := app()
	a.GitOps = &config.GitOps{URL: "https://git.test/shop/deploy.git", Branch: "main", Paths: []string{"clusters/{cluster}/values.yaml"},
		Edit: "helm", Mode: config.GitOpsModePullRequest, PullRequest: &config.PullRequest{
			Host: "gitea", APIURL: "https://git.test", Repository: "shop/deploy", MergeMethod: "merge", Revert: "pullRequest",
			MergeDeadline: &config.Duration{Duration: time.Hour}, PollInterval: &config.Duration{Duration: time.Minute},
		}}
	return a
}

func prFunction(repo *embedded.Repo, at *time.Time) *launch.Function {
	cfg := &config.Config{Applications: []config.Application{prApp()}}
	return launch.New(cfg, repo, func() time.Time { return *at })
}

func prStatus(t *testing.T, id string, st events.PullRequestStatus) cloudevents.Event {
	t.Helper()
	st.RolloutID = rolloutID
	e, err := events.New(id, events.Source, events.TypePullRequestStatus, st)
	if err != nil {
		t.Fatal(err)
	}
	e.SetExtension(events.ExtRolloutID, rolloutID)
	return e
}

// A wave of a pull-request application waits for its pull request: launch
// asks for it once, with a timer at the merge deadline; the status "open"
// shows in Waiting; "merged" (verified) starts the wave's clusters.
func TestLaunchWaitsForThePullRequest(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, nil)
	at := now
	f := prFunction(repo, &at)
	evs, err := f.Handle(ctx, waveStarted(t, 0, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	mergeBy := now.Add(time.Hour)
	want := []emitted{
		{"ws/" + events.TypePullRequestRequested + "/0/apply/open", events.TypePullRequestRequested, "", time.Time{},
			events.PullRequestRequested{RolloutID: rolloutID, Application: "shop", Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestOpen, Deadline: mergeBy}},
		{"ws/" + events.TypeWaveContinued + "/pullrequest/0/deadline", events.TypeWaveContinued, "", mergeBy,
			events.WaveStarted{RolloutID: rolloutID, Wave: 0, Clusters: []string{"c1"}}},
	}
	if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
		t.Errorf("emitted (-want +got):\n%s", diff)
	}
	ro, _ := repo.Get(ctx, rolloutID)
	if ro.Waiting != "wave 1 (canary) waits for its pull request to be opened" || ro.Waves[0].Clusters[0].Phase != rollout.ClusterPending {
		t.Errorf("waiting %q, c1 %s; want c1 pending behind the pull request", ro.Waiting, ro.Waves[0].Clusters[0].Phase)
	}
	// Redelivered: nothing asked twice.
	if evs, err := f.Handle(ctx, waveStarted(t, 0, "c1")); err != nil || len(evs) != 0 {
		t.Errorf("redelivered wave: %d events, %v", len(evs), err)
	}

	url := "https://git.test/shop/deploy/pulls/7"
	if evs, err := f.Handle(ctx, prStatus(t, "st1", events.PullRequestStatus{Wave: 0, Purpose: events.PurposeApply, Number: 7, URL: url,
		Branch: "flotilla/shop-1/1", State: events.PullRequestOpened})); err != nil || len(evs) != 0 {
		t.Fatalf("status open: %d events, %v; want none", len(evs), err)
	}
	ro, _ = repo.Get(ctx, rolloutID)
	wantWaiting := "wave 1 (canary) waits for pull request #7 to be merged (" + url + ") until " + mergeBy.Format(time.RFC3339)
	if ro.Waiting != wantWaiting {
		t.Errorf("Waiting = %q, want %q", ro.Waiting, wantWaiting)
	}

	evs, err = f.Handle(ctx, prStatus(t, "st2", events.PullRequestStatus{Wave: 0, Purpose: events.PurposeApply, Number: 7, URL: url,
		State: events.PullRequestMerged, MergeCommit: "abc", Verified: true}))
	if err != nil {
		t.Fatal(err)
	}
	got := summarize(t, evs)
	if len(got) != 2 || got[1].Type != events.TypePipelineRunRequested {
		t.Fatalf("merged: emitted %+v; want c1's run and deadline", got)
	}
	ro, _ = repo.Get(ctx, rolloutID)
	if pr := ro.Waves[0].PullRequest; pr.State != rollout.PullRequestMerged || pr.MergeCommit != "abc" || ro.Waves[0].Clusters[0].Phase != rollout.ClusterApplying {
		t.Errorf("after the merge: %+v, c1 %s", pr, ro.Waves[0].Clusters[0].Phase)
	}
	// A late status changes nothing.
	if evs, err := f.Handle(ctx, prStatus(t, "st3", events.PullRequestStatus{Wave: 0, Purpose: events.PurposeApply, Number: 7, State: events.PullRequestClosed})); err != nil || len(evs) != 0 {
		t.Errorf("late status: %d events, %v", len(evs), err)
	}
}

// What aborts: closed unmerged, a merge the base does not hold, a failure,
// the deadline.
func TestLaunchAbortsOnThePullRequest(t *testing.T) {
	tests := []struct {
		name   string
		status *events.PullRequestStatus
		reason string
	}{
		{"closed", &events.PullRequestStatus{State: events.PullRequestClosed, Actor: "bob"}, "closed without merging by bob"},
		{"merged, not held", &events.PullRequestStatus{State: events.PullRequestMerged, Error: "main does not hold it"}, "main does not hold it"},
		{"failed", &events.PullRequestStatus{State: events.PullRequestFailed, Error: "403 forbidden"}, "403 forbidden"},
		{"deadline", nil, "not merged by its deadline " + now.Add(time.Hour).Format(time.RFC3339)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			newRollout(t, repo, nil)
			at := now
			f := prFunction(repo, &at)
			if _, err := f.Handle(ctx, waveStarted(t, 0, "c1")); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Handle(ctx, prStatus(t, "open", events.PullRequestStatus{Wave: 0, Purpose: events.PurposeApply, Number: 7, State: events.PullRequestOpened})); err != nil {
				t.Fatal(err)
			}
			var evs []cloudevents.Event
			var err error
			if tt.status == nil {
				at = now.Add(time.Hour)
				evs, err = f.Handle(ctx, waveStarted(t, 0, "c1")) // the deadline timer
			} else {
				st := *tt.status
				st.Wave, st.Purpose, st.Number = 0, events.PurposeApply, 7
				evs, err = f.Handle(ctx, prStatus(t, "st", st))
			}
			if err != nil {
				t.Fatal(err)
			}
			got := summarize(t, evs)
			if len(got) != 1 || got[0].Type != events.TypeRolloutAbortRequested {
				t.Fatalf("emitted %+v; want an abort", got)
			}
			if diff := cmp.Diff(events.Control{RolloutID: rolloutID, User: "pull request #7", Reason: tt.reason}, got[0].Data); diff != "" {
				t.Errorf("abort (-want +got):\n%s", diff)
			}
		})
	}
}

// A rollout that fails gets the open pull request of a wave that no
// longer waits closed at once, with its reason, recorded closed by
// flotilla; a closed status then changes nothing. Nothing is asked for a
// rollout still waiting for it, nor for one with none open.
func TestLaunchClosesThePullRequestOfAFailedRollout(t *testing.T) {
	tests := []struct {
		name  string
		phase rollout.Phase
		state rollout.PullRequestState
		want  bool
	}{
		{"failed", rollout.Failed, rollout.PullRequestOpen, true},
		{"merged already", rollout.Failed, rollout.PullRequestMerged, false},
		{"still waiting", rollout.Progressing, rollout.PullRequestOpen, false},
	}
	const reason = "wave 1 (canary): cluster c1 failed: analysis"
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			deadline := now.Add(time.Hour)
			newRollout(t, repo, func(r *rollout.Rollout) {
				r.Phase, r.Reason = tt.phase, reason
				r.Waves[0].PullRequest = &rollout.PullRequest{State: tt.state, Number: 7, Deadline: deadline}
			})
			at := now
			f := prFunction(repo, &at)
			e, err := events.New("end", events.Source, events.TypeRolloutFailed, events.RolloutResult{RolloutID: rolloutID, Reason: reason})
			if err != nil {
				t.Fatal(err)
			}
			e.SetExtension(events.ExtRolloutID, rolloutID)
			evs, err := f.Handle(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			var want []emitted
			if tt.want {
				want = []emitted{{"end/" + events.TypePullRequestRequested + "/0/apply/close", events.TypePullRequestRequested, "", time.Time{},
					events.PullRequestRequested{RolloutID: rolloutID, Application: "shop", Wave: 0, Purpose: events.PurposeApply,
						Op: events.PullRequestClose, Number: 7, Deadline: deadline, Reason: reason}}}
			}
			if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
				t.Errorf("emitted (-want +got):\n%s", diff)
			}
			if !tt.want {
				return
			}
			ro, _ := repo.Get(ctx, rolloutID)
			if pr := ro.Waves[0].PullRequest; pr.State != rollout.PullRequestClosed || pr.Message != "closed by flotilla: "+reason {
				t.Errorf("recorded %+v", pr)
			}
			if evs, err := f.Handle(ctx, prStatus(t, "closed", events.PullRequestStatus{Wave: 0, Purpose: events.PurposeApply, Number: 7,
				State: events.PullRequestClosed, Actor: "flotilla"})); err != nil || len(evs) != 0 {
				t.Errorf("closed status: %d events, %v; want none", len(evs), err)
			}
		})
	}
}

// Where the merge stands shows in Waiting: asked, failing with the host's
// answer and the next attempt, failed with how to retry. A user's retry of
// a failed merge asks the host again (not a retry naming a cluster).
func TestLaunchSaysWhereTheMergeStands(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	newRollout(t, repo, nil)
	at := now
	f := prFunction(repo, &at)
	if _, err := f.Handle(ctx, waveStarted(t, 0, "c1")); err != nil {
		t.Fatal(err)
	}
	url := "https://git.test/shop/deploy/pulls/7"
	open := "wave 1 (canary) waits for pull request #7 to be merged (" + url + ") until " + now.Add(time.Hour).Format(time.RFC3339)
	next := now.Add(4 * time.Second)
	for _, step := range []struct {
		st   events.PullRequestStatus
		want string
	}{
		{events.PullRequestStatus{AutoMerge: events.MergeAsked, Head: "h1"}, open + "; asked the host to merge it"},
		{events.PullRequestStatus{AutoMerge: events.MergeFailing, MergeError: "Gitea answered 500: boom", NextMerge: next},
			open + "; merging failed (Gitea answered 500: boom), asking again at " + next.Format(time.RFC3339)},
		{events.PullRequestStatus{AutoMerge: events.MergeFailed, MergeError: "Gitea answered 500: boom"},
			open + "; merging failed (Gitea answered 500: boom): `flotilla retry " + rolloutID + "` asks again"},
	} {
		st := step.st
		st.Wave, st.Purpose, st.Number, st.URL, st.State = 0, events.PurposeApply, 7, url, events.PullRequestOpened
		if evs, err := f.Handle(ctx, prStatus(t, "st-"+st.AutoMerge, st)); err != nil || len(evs) != 0 {
			t.Fatalf("status %s: %d events, %v; want none", st.AutoMerge, len(evs), err)
		}
		if ro, _ := repo.Get(ctx, rolloutID); ro.Waiting != step.want {
			t.Errorf("merge %s: Waiting = %q, want %q", st.AutoMerge, ro.Waiting, step.want)
		}
	}

	if evs, err := f.Handle(ctx, retryRequested(t, "c1", 1)); err != nil || len(evs) != 0 {
		t.Errorf("a retry of cluster c1: %d events, %v; want none (the merge is the wave's)", len(evs), err)
	}
	evs, err := f.Handle(ctx, retryRequested(t, "", 2))
	if err != nil {
		t.Fatal(err)
	}
	want := []emitted{{"retry/" + events.TypePullRequestRequested + "/0/apply/merge", events.TypePullRequestRequested, "", time.Time{},
		events.PullRequestRequested{RolloutID: rolloutID, Application: "shop", Wave: 0, Purpose: events.PurposeApply, Op: events.PullRequestMerge,
			Number: 7, Head: "h1", Deadline: now.Add(time.Hour), Attempt: 1, Since: now, Retry: 2}}}
	if diff := cmp.Diff(want, summarize(t, evs)); diff != "" {
		t.Errorf("a retry: emitted (-want +got):\n%s", diff)
	}
	if ro, _ := repo.Get(ctx, rolloutID); ro.Waiting != open+"; asked the host to merge it" {
		t.Errorf("after the retry: Waiting = %q", ro.Waiting)
	}
}
