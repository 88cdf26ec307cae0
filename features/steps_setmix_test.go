package features

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/events"
)

// A release set of git and image members (docs/design/release-sets.md,
// "Git and image members"): the Job and the api rendered from the
// deployments repository, the frontend an image application of the
// registry, its workload live in the clusters. Its rollouts are named by
// the tuple's tag: each git member at the commit (main@abbrev), the
// frontend at its tag once it was pushed.

func (s *scenario) registerSetMixSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a deployments repository with the release set "([^"]*)": the Job "([^"]*)", then "([^"]*)", then the image application "([^"]*)" that tracks "([^"]*)"$`, s.mixedSetRepository)
	sc.Step(`^a deployments repository with the release set "([^"]*)": the image application "([^"]*)" that tracks "([^"]*)" leading, then the Job "([^"]*)", then "([^"]*)"$`, s.mixedSetRepositoryImageLead)
	sc.Step(`^the set's rollout of the first commit alone succeeds$`, s.mixedFirstRollout)
	sc.Step(`^the set's rollout of (the first|that) commit and "([^"]*)" of "([^"]*)" (succeeds|is rolled back)$`, s.mixedRolloutEnds)
	sc.Step(`^a push changes the greeting of the set's git members to "([^"]*)"$`, s.pushSetGreeting)
	sc.Step(`^the watch saw the primary of "([^"]*)" in cluster "([^"]*)" run that commit$`, s.watchSawThatCommit)
	sc.Step(`^flotilla journals the drift of the member "([^"]*)" in cluster "([^"]*)" to image "([^"]*)" from the set's version of the first commit and "([^"]*)" of "([^"]*)" within (\d+) seconds$`, s.mixedDriftJournaled)
	sc.Step(`^a rollout of kind "([^"]*)" of the set's version of the first commit and "([^"]*)" of "([^"]*)" to "([^"]*)" succeeds$`, s.mixedKindRolloutSucceeds)
	sc.Step(`^a rollout of kind "([^"]*)" of the set's version of the first commit alone to "([^"]*)" succeeds$`, s.mixedFirstKindRolloutSucceeds)
	sc.Step(`^flotilla journals the drift of the member "([^"]*)" in cluster "([^"]*)" to image "([^"]*)" from the set's version of the first commit alone within (\d+) seconds$`, s.mixedFirstDriftJournaled)
	// On the Tekton executor (steps_setmixtek_test.go).
	sc.Step(`^every cluster's succeeded PipelineRun of the set's rollout of (the first|that) commit and "([^"]*)" of "([^"]*)" carries its members in order, the frontend by digest, and says the api ran (the first|that) commit and the frontend "([^"]*)" before$`, s.mixedRunsCarryTheTuple)
	sc.Step(`^cluster "([^"]*)"'s succeeded PipelineRun of the set's rollout of (the first|that) commit and "([^"]*)" of "([^"]*)" carries its members in order, the frontend by digest, and says the api ran (the first|that) commit and the frontend "([^"]*)" before$`, s.mixedRunCarriesTheTuple)
	sc.Step(`^the set's rollout of (the first|that) commit and "([^"]*)" of "([^"]*)" starts$`, s.mixedRolloutStarts)
	sc.Step(`^the set's rollout of (the first|that) commit and "([^"]*)" of "([^"]*)" is superseded$`, s.mixedRolloutSuperseded)
	sc.Step(`^the watch saw the primary of "([^"]*)" in cluster "([^"]*)" run version "([^"]*)"$`, s.watchSawVersion)
	sc.Step(`^every cluster's succeeded PipelineRun of the set's rollout of the first commit alone applies the first commit, the members "([^"]*)" in order$`, s.mixedFirstRuns)
	sc.Step(`^in cluster "([^"]*)" the succeeded PipelineRun rolling back the set's rollout of that commit and "([^"]*)" of "([^"]*)" applies (the first|that) commit, the members "([^"]*)" in order$`, s.mixedRevertRun)
}

// mixedSetRepository is setRepository's repository without the frontend's
// manifests (its image is the registry's, its workload live): the Job's
// and the api's, greeting "hello", as the first commit.
func (s *scenario) mixedSetRepository(ctx context.Context, set, job, api, frontend, repo string) error {
	if err := s.setRepository(ctx, set, job, api, frontend); err != nil {
		return err
	}
	delete(s.w.set.manifests, frontend+"/deploy.yaml") // a push changes the git members' only
	s.w.set.imageFrontend = true
	s.w.second = &secondApp{name: frontend, repo: repo} // its pushes and workload (steps_engine_test.go)
	return nil
}

// mixedSetRepositoryImageLead is mixedSetRepository with the frontend
// leading the set: listed first, depending on nothing (release-sets.md,
// "An image lead"), the Job and the api after it.
func (s *scenario) mixedSetRepositoryImageLead(ctx context.Context, set, frontend, repo, job, api string) error {
	if err := s.mixedSetRepository(ctx, set, job, api, frontend, repo); err != nil {
		return err
	}
	s.w.set.frontendLeads = true
	return nil
}

// mixedTag is the tag of the set's version: each git member at commit,
// then the frontend at version ("" when it has no entry yet); the
// frontend first when it leads (the set's order).
func (s *scenario) mixedTag(commit, version string) string {
	rs := s.w.set
	tag := rs.job + ":" + commitVersion(commit) + "," + rs.api + ":" + commitVersion(commit)
	switch {
	case version == "":
	case rs.frontendLeads:
		tag = rs.frontend + ":" + version + "," + tag
	default:
		tag += "," + rs.frontend + ":" + version
	}
	return tag
}

// mixedFirstRollout delivers the push of the repository's first commit and
// waits for the set's rollout of it (the git members alone) to succeed.
func (s *scenario) mixedFirstRollout(ctx context.Context) error {
	first := s.w.git.commits["first"]
	if err := s.deliverGitPush(ctx, strings.Repeat("0", 40), first, nil); err != nil {
		return err
	}
	return s.rolloutSucceeds(ctx, s.mixedTag(first, ""))
}

// mixedRolloutEnds waits for the set's rollout of the commit with the
// frontend app at version to end as said.
func (s *scenario) mixedRolloutEnds(ctx context.Context, which, version, app, end string) error {
	if app != s.w.set.frontend {
		return fmt.Errorf("the set's image member is %s, not %s", s.w.set.frontend, app)
	}
	commit := s.w.git.commits[map[string]string{"that": "that", "the first": "first"}[which]]
	want := events.TypeRolloutSucceeded
	if end == "is rolled back" {
		want = events.TypeRolloutRolledBack
	}
	return s.rolloutEnds(ctx, s.mixedTag(commit, version), want)
}

// watchSawThatCommit reads the watch of the clusters' Deployments (the
// application's workloads are watched): the primary of app in cluster ran
// that commit at some point (a cluster the rollback then reverted).
func (s *scenario) watchSawThatCommit(app, cluster string) error {
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	at, ok := w.firstSeen(cluster, app+"-primary", rev)
	if !ok {
		return fmt.Errorf("the watch never saw %s-primary in %s run %s", app, cluster, rev)
	}
	fmt.Printf("%s-primary in %s ran that commit at %s\n", app, cluster, at.Format("15:04:05.000"))
	return nil
}

// mixedVersion is the tag of the set's version of the first commit with
// app, the set's image member, at version.
func (s *scenario) mixedVersion(version, app string) (string, error) {
	if app != s.w.set.frontend {
		return "", fmt.Errorf("the set's image member is %s, not %s", s.w.set.frontend, app)
	}
	return s.mixedTag(s.w.git.commits["first"], version), nil
}

// mixedDriftJournaled waits for the set's drift.detected naming member in
// cluster, its primary running image, held against the set's version of
// the first commit with the frontend at version (its tag and the tuple's
// hash, as the rollout that deployed it carried).
func (s *scenario) mixedDriftJournaled(ctx context.Context, member, cluster, image, version, app string, seconds int) error {
	tuple, err := s.mixedVersion(version, app)
	if err != nil {
		return err
	}
	return s.memberDriftJournaled(ctx, member, cluster, image, tuple, seconds)
}

// mixedKindRolloutSucceeds waits for a rollout of kind of the set's
// version of the first commit with the frontend at version to exactly
// clusters, and for it to succeed.
func (s *scenario) mixedKindRolloutSucceeds(ctx context.Context, kind, version, app, clusters string) error {
	tuple, err := s.mixedVersion(version, app)
	if err != nil {
		return err
	}
	return s.kindRolloutSucceeds(ctx, kind, tuple, clusters)
}

// mixedFirstKindRolloutSucceeds waits for a rollout of kind of the set's
// version of the first commit alone (before the frontend's first push: no
// entry of it) to exactly clusters, and for it to succeed.
func (s *scenario) mixedFirstKindRolloutSucceeds(ctx context.Context, kind, clusters string) error {
	return s.kindRolloutSucceeds(ctx, kind, s.mixedTag(s.w.git.commits["first"], ""), clusters)
}

// mixedFirstDriftJournaled waits for the set's drift.detected naming
// member in cluster, its primary running image, held against the set's
// version of the first commit alone (before the frontend's first push).
func (s *scenario) mixedFirstDriftJournaled(ctx context.Context, member, cluster, image string, seconds int) error {
	return s.memberDriftJournaled(ctx, member, cluster, image, s.mixedTag(s.w.git.commits["first"], ""), seconds)
}
