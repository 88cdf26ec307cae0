package proposer

import (
	"fmt"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// title is a pull request's title:
//
//	flotilla: api 1.4.2 -> wave 2 (prod) (rollout api-1a2b3c)
//	flotilla: revert api 1.4.2 in wave 2 (prod) (rollout api-1a2b3c)
func title(ro rollout.Rollout, req events.PullRequestRequested) string {
	w := ro.Waves[req.Wave]
	if req.Purpose == events.PurposeRevert {
		return fmt.Sprintf("flotilla: revert %s %s in wave %d (%s) (rollout %s)", ro.Application, ro.Tag, req.Wave+1, w.Name, ro.ID)
	}
	return fmt.Sprintf("flotilla: %s %s -> wave %d (%s) (rollout %s)", ro.Application, ro.Tag, req.Wave+1, w.Name, ro.ID)
}

// commitMessage is the proposal's commit message: the title, and trailers
// with the image and the rollout.
func commitMessage(ro rollout.Rollout, req events.PullRequestRequested) string {
	return fmt.Sprintf("%s\n\nImage: %s\nRollout: %s\nWave: %d\n", title(ro, req), ro.Ref(), ro.ID, req.Wave+1)
}

// body is a pull request's description: what it rolls out, where, what
// merging does and what closing does, and a marker flotilla finds it by.
func body(ro rollout.Rollout, req events.PullRequestRequested, p gitops.Proposed) string {
	var b strings.Builder
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w := ro.Waves[req.Wave]
	if req.Purpose == events.PurposeRevert {
		f("flotilla rolled back **%s** %s (rollout `%s`): %s\n\n", ro.Application, ro.Tag, ro.ID, ro.Reason)
		f("This writes back what each cluster of wave %d (%s) ran before. The clusters run it already (the revert was applied live); merging keeps the repository in step, so a GitOps agent does not apply the failed version again.\n\n", req.Wave+1, w.Name)
	} else {
		f("flotilla rolls out **%s** %s (rollout `%s`) to wave %d of %d (%s).\n\n", ro.Application, ro.Tag, ro.ID, req.Wave+1, len(ro.Waves), w.Name)
		f("Merging starts the wave: each cluster's canary is applied and analysed by Flagger. ")
		f("Closing this pull request without merging it aborts the rollout (the waves before are rolled back). ")
		if pr := w.PullRequest; pr != nil && !pr.Deadline.IsZero() {
			f("If it is not merged by %s, the rollout is aborted.", pr.Deadline.UTC().Format(time.RFC3339))
		}
		f("\n\n")
	}
	f("| | |\n|---|---|\n")
	f("| application | `%s` |\n", ro.Application)
	f("| version | `%s` |\n", ro.Tag)
	f("| image | `%s` |\n", ro.Image)
	f("| digest | `%s` |\n", ro.Digest)
	if ro.PreviousTag != "" {
		f("| previous version | `%s` |\n", ro.PreviousTag)
	}
	if ro.SignedBy != "" {
		f("| signed by | %s |\n", ro.SignedBy)
	}
	f("| base | `%s` at `%.12s` |\n", p.BaseBranch, p.Base)
	f("\nWaves:\n\n")
	for i, wave := range ro.Waves {
		names := make([]string, len(wave.Clusters))
		for j, c := range wave.Clusters {
			names[j] = c.Name
		}
		mark := ""
		if i == req.Wave {
			mark = " **<- this pull request**"
		}
		f("%d. %s: %s%s\n", i+1, wave.Name, strings.Join(names, ", "), mark)
	}
	f("\nFiles:\n\n")
	for _, file := range p.Files {
		f("- `%s`\n", file)
	}
	f("\nFollow it with `flotilla describe rollout %s`.\n", ro.ID)
	f("\n<!-- flotilla:rollout=%s wave=%d purpose=%s -->\n", ro.ID, req.Wave+1, req.Purpose)
	return b.String()
}
