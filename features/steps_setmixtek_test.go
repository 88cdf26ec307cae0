package features

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// A release set of git and image members on the Tekton executor
// (docs/design/release-sets.md, "Git and image members"): each cluster's
// PipelineRun runs apply-manifests at the tuple's commit, its members
// param carrying the Job and the api (rendered at the commit) and the
// frontend with its entry's image; its previous-member-revisions result
// says what each canaried member ran before.

// tektonMember is what a step reads of one member in a PipelineRun's
// members param: its name and, for an image member, its image.
type tektonMember struct{ Application, Image string }

// mixedRunsCarryTheTuple reads, for up to a minute (a run ends a poll
// after its cluster's last canary promoted, which may end the rollout
// first), every cluster's succeeded PipelineRun of the set's rollout of
// the commit with the frontend at version: its git-commit param the
// commit, its members param the Job, the api, then the frontend at
// version by digest (the frontend first when it leads), and its previous-member-revisions result the api
// at the commit before and the frontend at version before, by digest.
func (s *scenario) mixedRunsCarryTheTuple(ctx context.Context, which, version, app, beforeWhich, before string) error {
	clusters := map[string]bool{}
	for _, c := range s.w.clusters {
		clusters[c.Name] = true
	}
	return s.mixedRunsCarry(ctx, clusters, which, version, app, beforeWhich, before)
}

// mixedRunCarriesTheTuple is mixedRunsCarryTheTuple in one cluster (one
// that succeeded in a rollout that then failed elsewhere).
func (s *scenario) mixedRunCarriesTheTuple(ctx context.Context, cluster, which, version, app, beforeWhich, before string) error {
	return s.mixedRunsCarry(ctx, map[string]bool{cluster: true}, which, version, app, beforeWhich, before)
}

func (s *scenario) mixedRunsCarry(ctx context.Context, clusters map[string]bool, which, version, app, beforeWhich, before string) error {
	if s.w.tekton == nil {
		return fmt.Errorf("no Tekton executor: a step installing the pipelines comes first")
	}
	rs := s.w.set
	if app != rs.frontend {
		return fmt.Errorf("the set's image member is %s, not %s", rs.frontend, app)
	}
	commit, beforeCommit := s.w.git.commits[commitKey(which)], s.w.git.commits[commitKey(beforeWhich)]
	id, err := s.rolloutID(ctx, s.mixedTag(commit, version))
	if err != nil {
		return err
	}
	fe, err := s.refOf(rs.frontend, version)
	if err != nil {
		return err
	}
	feBefore, err := s.refOf(rs.frontend, before)
	if err != nil {
		return err
	}
	want := []tektonMember{{rs.job, ""}, {rs.api, ""}, {rs.frontend, fe}}
	if rs.frontendLeads {
		want = []tektonMember{{rs.frontend, fe}, {rs.job, ""}, {rs.api, ""}}
	}
	wantBefore := map[string]string{rs.api: tasks.Revision(s.w.git.url, beforeCommit), rs.frontend: feBefore}
	return forAMinute(ctx, func() error {
		return s.mixedRunsSucceeded(ctx, id, clusters, commit, want, pipelines.ResultPreviousMemberRevisions, wantBefore)
	})
}

// mixedRevertRun reads the succeeded PipelineRun of the rollback of the
// set's rollout of that commit with the frontend app at version, in a
// cluster: its git-commit param the commit which (the cluster's previous
// version) and its members in order ("shop-frontend:2.0.0,shop-api,
// shop-migrate": the dependents first, an image member by digest).
func (s *scenario) mixedRevertRun(ctx context.Context, cluster, version, app, which, members string) error {
	if s.w.tekton == nil {
		return fmt.Errorf("no Tekton executor: a step installing the pipelines comes first")
	}
	if app != s.w.set.frontend {
		return fmt.Errorf("the set's image member is %s, not %s", s.w.set.frontend, app)
	}
	id, err := s.rolloutID(ctx, s.mixedTag(s.w.git.commits["that"], version))
	if err != nil {
		return err
	}
	want, err := s.tektonMembers(members)
	if err != nil {
		return err
	}
	return forAMinute(ctx, func() error {
		return s.mixedRunsSucceeded(ctx, id+"-revert", map[string]bool{cluster: true}, s.w.git.commits[commitKey(which)], want, "", nil)
	})
}

// mixedFirstRuns reads every cluster's succeeded PipelineRun of the set's
// rollout of the first commit alone: its git-commit param the first
// commit and its members in order ("shop-frontend,shop-migrate,shop-api":
// an image member without a version is in the run without an image, its
// canary alone, as an image lead without an entry is).
func (s *scenario) mixedFirstRuns(ctx context.Context, members string) error {
	if s.w.tekton == nil {
		return fmt.Errorf("no Tekton executor: a step installing the pipelines comes first")
	}
	first := s.w.git.commits["first"]
	id, err := s.rolloutID(ctx, s.mixedTag(first, ""))
	if err != nil {
		return err
	}
	want, err := s.tektonMembers(members)
	if err != nil {
		return err
	}
	clusters := map[string]bool{}
	for _, c := range s.w.clusters {
		clusters[c.Name] = true
	}
	return forAMinute(ctx, func() error {
		return s.mixedRunsSucceeded(ctx, id, clusters, first, want, "", nil)
	})
}

// tektonMembers parses members ("shop-frontend:2.0.0,shop-api"): each
// member's name and, with a version, its image by digest.
func (s *scenario) tektonMembers(members string) ([]tektonMember, error) {
	var want []tektonMember
	for _, m := range strings.Split(members, ",") {
		name, version, _ := strings.Cut(m, ":")
		tm := tektonMember{Application: name}
		if version != "" {
			var err error
			if tm.Image, err = s.refOf(name, version); err != nil {
				return nil, err
			}
		}
		want = append(want, tm)
	}
	return want, nil
}

func commitKey(which string) string {
	return map[string]string{"that": "that", "the first": "first"}[which]
}

// mixedRunsSucceeded checks once that each of clusters has a succeeded
// PipelineRun of rollout id (the label flotilla puts on it) at commit
// with the members want, in order, and, when result is set, that result
// says wantBefore.
func (s *scenario) mixedRunsSucceeded(ctx context.Context, id string, clusters map[string]bool, commit string, want []tektonMember, result string, wantBefore map[string]string) error {
	t := s.w.tekton
	runs, err := t.cluster.Tekton.TektonV1().PipelineRuns(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=" + pipelines.LabelValue(id)})
	if err != nil {
		return fmt.Errorf("listing PipelineRuns of %s: %w", id, err)
	}
	done := map[string]string{} // the run read, by cluster
	for _, pr := range runs.Items {
		cluster := pr.Labels[pipelines.LabelCluster]
		if !clusters[cluster] || !pr.Status.GetCondition(apis.ConditionSucceeded).IsTrue() {
			continue
		}
		if err := mixedRunIs(&pr, commit, want, result, wantBefore); err != nil {
			return err
		}
		done[cluster] = pr.Name
	}
	for c := range clusters {
		if done[c] == "" {
			return fmt.Errorf("no succeeded PipelineRun of rollout %s for cluster %s in %s/%s", id, c, t.cluster.Name, t.namespace)
		}
	}
	for _, c := range slices.Sorted(maps.Keys(done)) {
		fmt.Printf("PipelineRun %s (cluster %s): commit %.12s, members %v\n", done[c], c, commit, want)
	}
	return nil
}

// mixedRunIs checks a PipelineRun's source, git-commit and members params
// and, when result is set, its result of that name.
func mixedRunIs(pr *tektonv1.PipelineRun, commit string, want []tektonMember, result string, wantBefore map[string]string) error {
	params := map[string]string{}
	for _, p := range pr.Spec.Params {
		params[p.Name] = p.Value.StringVal
	}
	if params[pipelines.ParamSource] != "git" || params[tasks.ParamGitCommit] != commit {
		return fmt.Errorf("PipelineRun %s runs source %q at commit %q, want git at %s", pr.Name, params[pipelines.ParamSource], params[tasks.ParamGitCommit], commit)
	}
	var ms []tasks.SetMember
	if err := json.Unmarshal([]byte(params[tasks.ParamMembers]), &ms); err != nil {
		return fmt.Errorf("PipelineRun %s: param members: %w", pr.Name, err)
	}
	var got []tektonMember
	for _, m := range ms {
		got = append(got, tektonMember{m.Application, m.Image})
	}
	if d := cmp.Diff(want, got); d != "" {
		return fmt.Errorf("PipelineRun %s's members (-want +got):\n%s", pr.Name, d)
	}
	if result == "" {
		return nil
	}
	var before map[string]string
	for _, r := range pr.Status.Results {
		if r.Name == result {
			if err := json.Unmarshal([]byte(r.Value.StringVal), &before); err != nil {
				return fmt.Errorf("PipelineRun %s: result %s = %q: %w", pr.Name, r.Name, r.Value.StringVal, err)
			}
		}
	}
	if d := cmp.Diff(wantBefore, before); d != "" {
		return fmt.Errorf("PipelineRun %s's result %s, what the members ran before (-want +got):\n%s", pr.Name, result, d)
	}
	return nil
}

// mixedRolloutStarts waits for the set's rollout of the commit with the
// frontend app at version to start (plan decided it: a rollout in
// flight, which a later push takes as its baseline).
func (s *scenario) mixedRolloutStarts(ctx context.Context, which, version, app string) error {
	if app != s.w.set.frontend {
		return fmt.Errorf("the set's image member is %s, not %s", s.w.set.frontend, app)
	}
	_, err := s.rolloutID(ctx, s.mixedTag(s.w.git.commits[commitKey(which)], version))
	return err
}

// mixedRolloutSuperseded waits for the set's rollout of the commit with
// the frontend app at version to end superseded.
func (s *scenario) mixedRolloutSuperseded(ctx context.Context, which, version, app string) error {
	if app != s.w.set.frontend {
		return fmt.Errorf("the set's image member is %s, not %s", s.w.set.frontend, app)
	}
	version = s.mixedTag(s.w.git.commits[commitKey(which)], version)
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	e, err := s.w.sink.waitFor(ctx, "end of rollout "+id, func(e cloudevents.Event) bool {
		return (e.Type() == events.TypeRolloutSuperseded || e.Type() == events.TypeRolloutSucceeded || e.Type() == events.TypeRolloutRolledBack) &&
			events.RolloutID(e) == id
	})
	if err != nil {
		return err
	}
	if e.Type() != events.TypeRolloutSuperseded {
		return fmt.Errorf("rollout %s of %s ended %s, want superseded: %s", id, version, e.Type(), e.Data())
	}
	return nil
}

// watchSawVersion reads the watch of the clusters' Deployments: the
// primary of image member app in cluster ran version by digest (its
// revision, the image the set's run set) at some point.
func (s *scenario) watchSawVersion(app, cluster, version string) error {
	w := s.w.git.workloads
	if w == nil {
		return fmt.Errorf("the workloads are not watched: the watching step comes first")
	}
	ref, err := s.refOf(app, version)
	if err != nil {
		return err
	}
	at, ok := w.firstSeen(cluster, app+"-primary", ref)
	if !ok {
		return fmt.Errorf("the watch never saw %s-primary in %s run %s (version %s)", app, cluster, ref, version)
	}
	fmt.Printf("%s-primary in %s ran %s at %s\n", app, cluster, version, at.Format("15:04:05.000"))
	return nil
}
