package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// pullRequestGate holds the clusters of wave w of a GitOps application in
// mode pullRequest until the wave's pull request is merged: the first time
// it asks the proposer to open it, with a timer at its merge deadline; at
// the deadline, still unmerged, it aborts the rollout.
func (f *Function) pullRequestGate(e cloudevents.Event, r *rollout.Rollout, app config.Application, w int) (string, []cloudevents.Event, error) {
	g := app.GitOps
	if g == nil || g.Mode != config.GitOpsModePullRequest || g.PullRequest == nil {
		return "", nil, nil
	}
	wave := &r.Waves[w]
	pr := wave.PullRequest
	if pr.Merged() {
		return "", nil, nil
	}
	now := f.now().UTC()
	if pr == nil {
		deadline := now.Add(g.PullRequest.MergeDeadline.Duration)
		wave.PullRequest = &rollout.PullRequest{State: rollout.PullRequestRequested, Deadline: deadline, Updated: now}
		open, err := events.Derive(e, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/open", w, events.PurposeApply), events.PullRequestRequested{
			RolloutID: r.ID, Application: r.Application, Wave: w, Purpose: events.PurposeApply, Op: events.PullRequestOpen, Deadline: deadline,
		})
		if err != nil {
			return "", nil, err
		}
		due, err := events.Derive(e, events.TypeWaveContinued, fmt.Sprintf("pullrequest/%d/deadline", w),
			events.WaveStarted{RolloutID: r.ID, Wave: w, Clusters: wave.Pending()})
		if err != nil {
			return "", nil, err
		}
		return waitingFor(r, w), []cloudevents.Event{open, events.At(due, deadline)}, nil
	}
	if (pr.State == rollout.PullRequestRequested || pr.State == rollout.PullRequestOpen) && !now.Before(pr.Deadline) {
		abort, err := f.abort(e, r, w, fmt.Sprintf("not merged by its deadline %s", pr.Deadline.Format(time.RFC3339)))
		return waitingFor(r, w), abort, err
	}
	return waitingFor(r, w), nil, nil
}

// waitingFor says what wave w of r waits for.
func waitingFor(r *rollout.Rollout, w int) string {
	wave := r.Waves[w]
	pr := wave.PullRequest
	switch {
	case pr == nil || pr.State == rollout.PullRequestRequested:
		return fmt.Sprintf("wave %d (%s) waits for its pull request to be opened", w+1, wave.Name)
	case pr.State == rollout.PullRequestOpen:
		return fmt.Sprintf("wave %d (%s) waits for pull request #%d to be merged (%s) until %s%s", w+1, wave.Name, pr.Number, pr.URL,
			pr.Deadline.UTC().Format(time.RFC3339), merging(r, pr))
	}
	return fmt.Sprintf("wave %d (%s): pull request #%d %s: %s", w+1, wave.Name, pr.Number, pr.State, pr.Message)
}

// merging says where asking the host to merge pr stands, after a "; ",
// "" when flotilla does not ask (a human merges).
func merging(r *rollout.Rollout, pr *rollout.PullRequest) string {
	switch pr.AutoMerge {
	case "":
		return ""
	case events.MergeAsked:
		return "; asked the host to merge it"
	case events.MergeScheduled:
		return "; auto-merge: scheduled (the host merges it once its required checks pass)"
	case events.MergeFailing:
		return fmt.Sprintf("; merging failed (%s), asking again at %s", pr.MergeError, pr.NextMerge.UTC().Format(time.RFC3339))
	case events.MergeFailed:
		return fmt.Sprintf("; merging failed (%s): `flotilla retry %s` asks again", pr.MergeError, r.ID)
	}
	return "; auto-merge: " + pr.AutoMerge
}

// abort asks for the rollout's abort (the one audited control path), in
// the pull request's name.
func (f *Function) abort(e cloudevents.Event, r *rollout.Rollout, w int, reason string) ([]cloudevents.Event, error) {
	user := "its pull request"
	if pr := r.Waves[w].PullRequest; pr != nil && pr.Number != 0 {
		user = fmt.Sprintf("pull request #%d", pr.Number)
	}
	out, err := events.Derive(e, events.TypeRolloutAbortRequested, fmt.Sprintf("pullrequest/%d", w),
		events.Control{RolloutID: r.ID, User: user, Reason: reason})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{out}, nil
}

// pullRequest records what the proposer found of a wave's pull request:
// merged (and verified) or unchanged starts the wave; closed unmerged, a
// merge the base does not hold, or a failure aborts the rollout. A revert's
// pull request is only recorded.
func (f *Function) pullRequest(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	st, err := events.Decode[events.PullRequestStatus](e)
	if err != nil {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, st.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if st.Wave < 0 || st.Wave >= len(r.Waves) {
			return nil, nil
		}
		wave := &r.Waves[st.Wave]
		slot := &wave.PullRequest
		if st.Purpose == events.PurposeRevert {
			slot = &wave.RevertPullRequest
		}
		if *slot == nil {
			*slot = &rollout.PullRequest{}
		}
		pr := *slot
		switch pr.State {
		case rollout.PullRequestMerged, rollout.PullRequestClosed, rollout.PullRequestUnchanged, rollout.PullRequestFailed:
			return nil, nil // decided already: a redelivery, or a late read
		}
		record(pr, st, f.now().UTC())
		if st.Purpose == events.PurposeRevert || r.Phase != rollout.Progressing {
			return nil, nil
		}
		switch pr.State {
		case rollout.PullRequestOpen:
			if r.Wave == st.Wave {
				r.Waiting = waitingFor(r, st.Wave)
			}
			return nil, nil
		case rollout.PullRequestMerged, rollout.PullRequestUnchanged:
			return f.start(e, r, fleet)
		}
		return f.abort(e, r, st.Wave, pr.Message)
	})
	return out, err
}

// closePullRequests has the open pull request of a wave that no longer
// waits (its rollout failed) closed at once, with the reason for its
// comment (plan does the same for a rollout it supersedes). A poll that
// finds one would close it too: this spares reviewers a pull request that
// merges nothing for up to a poll interval.
func (f *Function) closePullRequests(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if !slices.ContainsFunc(f.cfg.Applications, func(a config.Application) bool {
		return a.GitOps != nil && a.GitOps.Mode == config.GitOpsModePullRequest
	}) {
		return nil, nil
	}
	res, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, res.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		return r.ClosePullRequests(e, r.Reason, f.now().UTC())
	})
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	return out, err
}

// record copies a status into the wave's pull request.
func record(pr *rollout.PullRequest, st events.PullRequestStatus, now time.Time) {
	if st.Number != 0 {
		pr.Number, pr.URL = st.Number, st.URL
	}
	if st.Branch != "" {
		pr.Branch = st.Branch
	}
	if st.AutoMerge != "" {
		pr.AutoMerge, pr.MergeError, pr.NextMerge = st.AutoMerge, st.MergeError, st.NextMerge
	}
	if st.Head != "" {
		pr.Head = st.Head
	}
	pr.MergeCommit, pr.Updated = st.MergeCommit, now
	switch st.State {
	case events.PullRequestOpened:
		pr.State = rollout.PullRequestOpen
	case events.PullRequestMerged:
		pr.State = rollout.PullRequestMerged
		if !st.Verified {
			pr.State, pr.Message = rollout.PullRequestFailed, st.Error
		}
	case events.PullRequestUnchanged:
		pr.State, pr.Message = rollout.PullRequestUnchanged, "the base held every image already"
	case events.PullRequestClosed:
		pr.State, pr.Message = rollout.PullRequestClosed, "closed without merging"
		if st.Actor != "" {
			pr.Message += " by " + st.Actor
		}
	default:
		pr.State, pr.Message = rollout.PullRequestFailed, st.Error
	}
}
