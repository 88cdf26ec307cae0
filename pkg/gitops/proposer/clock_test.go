package proposer_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gitops/pullrequest"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// The proposer schedules its next merge attempt and its next read on the
// engine's clock (WithClock): under a virtual clock two years ahead, at
// that clock's instants. Catches a proposer on time.Now under `flotilla
// simulate` (its attempts fell due at once, or never, in virtual time).
func TestProposerFollowsTheInjectedClock(t *testing.T) {
	virtual := time.Now().UTC().Add(2 * 365 * 24 * time.Hour).Truncate(time.Second)
	tests := []struct {
		name string
		op   string
		auto pullrequest.AutoMerge
		err  error
		want time.Duration // the next attempt's or read's, after the virtual now
	}{
		{name: "a merge attempt failing is tried again 2s on", op: events.PullRequestMerge, err: errors.New("Gitea answered 500: database is locked"), want: 2 * time.Second},
		{name: "an open pull request is read again a poll interval on", op: events.PullRequestRead, want: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := &recordingHost{state: pullrequest.Open, auto: tt.auto, autoErr: tt.err}
			p, _ := prSetup(t, host, func(r *rollout.Rollout) {
				r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 7}
			}, func(a *config.Application) {
				a.GitOps.PullRequest.AutoMerge = true
				a.GitOps.PullRequest.MergeRetryFor = &config.Duration{Duration: 5 * time.Minute}
				a.GitOps.PullRequest.PollInterval = &config.Duration{Duration: time.Minute}
			})
			p = p.WithClock(func() time.Time { return virtual })
			evs, err := p.Handle(t.Context(), prRequest(t, events.PullRequestRequested{Wave: 0, Purpose: events.PurposeApply, Op: tt.op,
				Number: 7, Head: "head", Attempt: 1, Since: virtual, Deadline: virtual.Add(time.Hour)}))
			if err != nil {
				t.Fatal(err)
			}
			_, next := statusOf(t, evs)
			if diff := cmp.Diff(tt.want, next.Sub(virtual)); diff != "" {
				t.Errorf("next attempt after the virtual now (-want +got):\n%s", diff)
			}
		})
	}
}
