package cli

import (
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// describe lists each wave's pull request: its state, where asking the host
// to merge it stands, and why it failed.
func TestDescribePullRequests(t *testing.T) {
	r := rollout.Rollout{ID: "shop-1", Phase: rollout.Progressing, Waves: []rollout.Wave{
		{Name: "canary", PullRequest: &rollout.PullRequest{State: rollout.PullRequestMerged, Number: 3, URL: "https://git.test/pulls/3", AutoMerge: events.MergeMerged}},
		{Name: "prod", PullRequest: &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 4, URL: "https://git.test/pulls/4",
			AutoMerge: events.MergeFailed, MergeError: "merging pull request #4: Gitea answered 500: database is locked"}},
	}}
	var b strings.Builder
	pullRequests(&b, r)
	for _, want := range [][]string{
		{"1 canary", "Merged", "#3", "https://git.test/pulls/3", "merged"},
		{"2 prod", "Open", "#4", "failed", "merging pull request #4: Gitea answered 500:"},
	} {
		found := false
		for _, line := range strings.Split(b.String(), "\n") {
			if containsAll(line, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no line with %q in:\n%s", want, b.String())
		}
	}
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
