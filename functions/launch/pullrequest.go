package launch

import (
	"context"
	"errors"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

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
				r.Waiting = r.PullRequestWaiting(st.Wave)
			}
			return nil, nil
		case rollout.PullRequestMerged, rollout.PullRequestUnchanged:
			return f.start(e, r, fleet)
		}
		return r.AbortForPullRequest(e, st.Wave, pr.Message)
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
