package launch

import (
	"context"
	"errors"
	"slices"

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
		return r.PullRequestFound(e, st, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
	})
	return out, err
}

// closePullRequests has the open pull request of a wave that no longer
// waits (its rollout failed) closed at once, with the reason for its
// comment (plan does the same for a rollout it supersedes). A poll that
// finds one would close it too: this spares reviewers a pull request that
// merges nothing for up to a poll interval.
func (f *Function) closePullRequests(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if !slices.ContainsFunc(f.cfg.Current().Applications, func(a config.Application) bool {
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
