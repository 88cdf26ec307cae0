package features

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
)

func (s *scenario) registerSetsSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a deployments repository with the release set "([^"]*)": the Job "([^"]*)", then "([^"]*)", then "([^"]*)"$`, s.setRepository)
	sc.Step(`^flotilla serving the release set "([^"]*)" in waves "([^"]*)" then "([^"]*)"$`, s.flotillaServingSet)
	sc.Step(`^a push changes the greeting of every member of the set to "([^"]*)"$`, s.pushSetGreeting)
	sc.Step(`^a push changes the greeting of every member of the set to "([^"]*)" and makes the Job "([^"]*)" fail$`, s.pushSetJobFailing)
	sc.Step(`^the Job "([^"]*)" in cluster "([^"]*)" fails at that commit$`, s.jobFailsAtThatCommit)
	sc.Step(`^the release set's own freeze window "([^"]*)" holds it for the next (\d+) seconds$`, s.setFrozen)
	sc.Step(`^the repository's first commit is pushed to the set$`, s.pushFirstToSet)
	sc.Step(`^the rollout of that commit waits for the freeze window "([^"]*)"$`, s.thatCommitWaitsForFreeze)
	sc.Step(`^no member's workload or Job in any cluster ran that commit before the freeze window ended$`, s.nothingBeforeThaw)
	sc.Step("^flotilla's rollout of that commit shows in cluster \"([^\"]*)\" the Job \"([^\"]*)\" failed with the Job's reason, as `flotilla describe rollout` and the web UI's card of that cluster do$", s.rolloutShowsJobFailed)
	sc.Step(`^the Job "([^"]*)" in every cluster ran that commit, greeting "([^"]*)", and the web UI's card of every cluster of that rollout says it complete$`, s.uiJobsComplete)
	sc.Step(`^the release set "([^"]*)" is in project "([^"]*)", whose approver is the API token "([^"]*)", and project "([^"]*)"'s approver is the API token "([^"]*)"$`, s.setInProject)
	sc.Step(`^wave (\d+) needs 1 approval$`, s.waveNeedsOne)
	sc.Step(`^the rollout of that commit waits for the approval of wave (\d+)$`, s.thatCommitWaitsForApproval)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of that commit and is refused: "([^"]*)"$`, s.thatCommitApprovalRefused)
	sc.Step(`^"([^"]*)" approves wave (\d+) of the rollout of that commit$`, s.thatCommitApproved)
	sc.Step(`^no member of the set is in cluster "([^"]*)" (\d+) seconds later$`, s.noMemberIn)
	sc.Step(`^that commit had one rollout, the set "([^"]*)"'s, with the members "([^"]*)"$`, s.oneSetRollout)
	sc.Step(`^the Job "([^"]*)" in every cluster ran (that|the first) commit, greeting "([^"]*)"$`, s.jobRan)
	sc.Step(`^the primary of "([^"]*)" in cluster "([^"]*)" runs image "([^"]*)"$`, s.primaryOfRunsImage)
	sc.Step(`^in cluster "([^"]*)" the primary of "([^"]*)" ran that commit, after the primary of "([^"]*)" did$`, s.primaryRanAfter)
	sc.Step(`^in cluster "([^"]*)" Flagger failed the canary "([^"]*)" and the workload "([^"]*)" never ran that commit$`, s.failedAndNeverRan)
	sc.Step(`^in no cluster did the primary of "([^"]*)" run that commit while the primary of "([^"]*)" did not$`, s.neverAhead)
	sc.Step("^`flotilla describe rollout` of that commit and the web UI's page of it name the members \"([^\"]*)\" in order$", s.membersShown)
}

// releaseSet is the scenario's set: its name and members in order.
type releaseSet struct {
	name               string
	job, api, frontend string
	// manifests write each member's manifest (by its path in the
	// repository) with a greeting.
	manifests map[string]func(greeting string) string
	// jobFailure is the reason a Job gave for failing, as a step read it
	// from the cluster.
	jobFailure string
	// frozenUntil is when the set's own freeze window ends.
	frozenUntil time.Time
	// imageFrontend: the frontend is an image member (a set of git and
	// image members, steps_setmix_test.go), configured as the scenario's
	// second application.
	imageFrontend bool
	// frontendLeads: the image frontend is listed first and depends on
	// nothing, so it leads the set (release-sets.md, "An image lead").
	frontendLeads bool
}

func setJob(name, greeting string) string {
	return strings.NewReplacer("{name}", name, "{greeting}", greeting).Replace(`apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: registry.example.com/migrate:1.0.0
          env:
            - {name: GREETING, value: "{greeting}"}
`)
}

// setFailingJob is setJob's Job that fails: its pod fits no node, and
// the Job may be active 2 s (DeadlineExceeded).
func setFailingJob(name, greeting string) string {
	return strings.Replace(setJob(name, greeting), "  backoffLimit: 0\n", "  backoffLimit: 0\n  activeDeadlineSeconds: 2\n", 1) +
		"      nodeSelector: {flotilla.test/no-such-node: \"true\"}\n"
}

func setDeployment(name, greeting string) string {
	return strings.NewReplacer("{name}", name, "{greeting}", greeting).Replace(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
  labels: {app: {name}}
spec:
  replicas: 1
  selector:
    matchLabels: {app: {name}}
  template:
    metadata:
      labels: {app: {name}}
    spec:
      containers:
        - name: {name}
          image: registry.example.com/{name}:1.0.0
          ports:
            - {name: http, containerPort: 9898}
          env:
            - {name: GREETING, value: "{greeting}"}
`)
}

// setRepository makes the deployments repository of a set: each member's
// manifests in a directory named after it, greeting "hello", as the
// "first" commit.
func (s *scenario) setRepository(ctx context.Context, set, job, api, frontend string) error {
	if s.w == nil {
		if err := s.aRegistry(); err != nil { // the scenario's directory (its registry goes unused)
			return err
		}
	}
	r := &gitRepo{bare: filepath.Join(s.w.dir, "deployments.git"), work: filepath.Join(s.w.dir, "work"), commits: map[string]string{}}
	r.url = "file://" + r.bare
	if _, err := git(ctx, s.w.dir, "init", "--bare", "--initial-branch=main", r.bare); err != nil {
		return err
	}
	if _, err := git(ctx, s.w.dir, "clone", r.bare, r.work); err != nil {
		return err
	}
	rs := &releaseSet{name: set, job: job, api: api, frontend: frontend}
	rs.manifests = map[string]func(string) string{
		job + "/job.yaml":         func(g string) string { return setJob(job, g) },
		api + "/deploy.yaml":      func(g string) string { return setDeployment(api, g) },
		frontend + "/deploy.yaml": func(g string) string { return setDeployment(frontend, g) },
	}
	if err := writeFile(filepath.Join(r.work, "README.md"), "# deployments\n"); err != nil {
		return err
	}
	for p, m := range rs.manifests {
		if err := writeFile(filepath.Join(r.work, p), m("hello")); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"checkout", "-B", "main"}, {"add", "."}, {"commit", "-m", "first"}, {"push", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	s.w.git, s.w.set = r, rs
	return nil
}

// flotillaServingSet serves the set: its members (the api's delivery
// policy, with the scenario's gate, for the api and the frontend; the
// Job none) with their dependsOn, the set listing them out of order (the
// order is dependsOn's).
func (s *scenario) flotillaServingSet(ctx context.Context, set, wave1, wave2 string) error {
	rs := s.w.set
	if rs == nil || rs.name != set {
		return fmt.Errorf("no release set %q: the repository step comes first", set)
	}
	s.w.gitSource = map[string]any{"url": s.w.git.url, "branch": "main", "paths": []string{rs.api}}
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		apps := cfg["applications"].([]map[string]any)
		api := apps[0]
		member := func(name string, dependsOn string) map[string]any {
			m := map[string]any{}
			for k, v := range api {
				m[k] = v
			}
			m["name"], m["workload"] = name, map[string]any{"kind": "Deployment", "name": name}
			m["source"] = map[string]any{"git": map[string]any{"url": s.w.git.url, "branch": "main", "paths": []string{name}}}
			if dependsOn != "" {
				m["dependsOn"] = []map[string]any{{"name": dependsOn}}
			}
			return m
		}
		job := map[string]any{
			"name": rs.job, "namespace": api["namespace"],
			"source":   map[string]any{"git": map[string]any{"url": s.w.git.url, "branch": "main", "paths": []string{rs.job}}},
			"workload": map[string]any{"kind": "Job", "name": rs.job},
		}
		set := map[string]any{"name": rs.name, "applications": []string{rs.frontend, rs.api, rs.job}}
		// The rollout's fields the steps set on the application are the
		// set's (a member's are refused).
		members := []map[string]any{member(rs.api, rs.job), member(rs.frontend, rs.api)}
		if rs.imageFrontend {
			// The frontend is the second application (an image one),
			// appended by configure.
			i := slices.IndexFunc(apps, func(a map[string]any) bool { return a["name"] == rs.frontend })
			if i < 0 {
				return fmt.Errorf("no image application %s configured", rs.frontend)
			}
			members[1] = apps[i]
			members[1]["dependsOn"] = []map[string]any{{"name": rs.api}}
			if rs.frontendLeads {
				delete(members[1], "dependsOn")
				set["applications"] = []string{rs.frontend, rs.job, rs.api}
			}
		}
		for _, k := range setRolloutFields {
			if v, ok := api[k]; ok {
				set[k] = v
			}
			for _, m := range members {
				delete(m, k)
			}
		}
		cfg["applications"] = append([]map[string]any{job}, members...)
		cfg["releaseSets"] = []map[string]any{set}
		return nil
	})
	if err := s.configureGitNamespace(ctx, set, wave1, wave2); err != nil {
		return err
	}
	s.w.workload = rs.api // the set's canary is its lead's
	if rs.frontendLeads {
		s.w.workload = rs.frontend
	}
	return s.w.flotilla.start(ctx)
}

// setRolloutFields are the fields of the scenario's application that are
// a release set's own (releaseSets[]).
var setRolloutFields = []string{"driftPolicy", "freezeWindows", "clusterSelector", "onNewVersion", "poll"}

// primaryOfRunsImage reads the image the primary of workload name runs in
// a cluster, waiting up to 30 s for it to be image.
func (s *scenario) primaryOfRunsImage(ctx context.Context, name, cluster, image string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	return s.waitImage(ctx, c, cluster, name+"-primary", image)
}

// configureGitNamespace writes the config (the gitSource a step set, the
// config edits) and makes the namespace in every cluster of the waves.
func (s *scenario) configureGitNamespace(ctx context.Context, app, wave1, wave2 string) error {
	if err := s.configure(ctx, app, "unused", "MinorVersion", wave1, wave2); err != nil {
		return err
	}
	return s.makeNamespace(ctx)
}

// pushSetGreeting commits every member's manifests with the greeting
// (one commit) and delivers its push; it is "that" commit.
func (s *scenario) pushSetGreeting(ctx context.Context, greeting string) error {
	return s.pushSet(ctx, greeting, "")
}

// pushSetJobFailing is pushSetGreeting with the Job failing
// (setFailingJob).
func (s *scenario) pushSetJobFailing(ctx context.Context, greeting, job string) error {
	if s.w.set.job != job {
		return fmt.Errorf("the set's Job is %s, not %s", s.w.set.job, job)
	}
	return s.pushSet(ctx, greeting, job)
}

// pushSet commits every member's manifests with the greeting, the Job
// failing if failing names it, and delivers its push: "that" commit.
func (s *scenario) pushSet(ctx context.Context, greeting, failing string) error {
	r, rs := s.w.git, s.w.set
	before, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	var paths []string
	for p, m := range rs.manifests {
		if failing != "" && p == failing+"/job.yaml" {
			m = func(g string) string { return setFailingJob(failing, g) }
		}
		if err := writeFile(filepath.Join(r.work, p), m(greeting)); err != nil {
			return err
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, args := range [][]string{{"add", "."}, {"commit", "-m", "greeting " + greeting}, {"push", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["that"] = strings.TrimSpace(head)
	return s.deliverGitPush(ctx, strings.TrimSpace(before), r.commits["that"], paths)
}

// oneSetRollout reads the sink's rollout.started of that commit (one, of
// the set) and the rollout's members in flotilla's API.
func (s *scenario) oneSetRollout(ctx context.Context, set, members string) error {
	version := commitVersion(s.w.git.commits["that"])
	var apps []string
	for _, e := range s.w.sink.all() {
		if e.Type() != events.TypeRolloutStarted {
			continue
		}
		if p, err := events.Decode[events.RolloutStarted](e); err == nil && p.Tag == version {
			apps = append(apps, p.Application)
		}
	}
	if d := cmp.Diff([]string{set}, apps); d != "" {
		return fmt.Errorf("the rollouts of %s, by application (-want +got):\n%s", version, d)
	}
	ro, err := s.rolloutOfThatCommit(ctx)
	if err != nil {
		return err
	}
	if d := cmp.Diff(strings.Split(members, ","), ro.Members); d != "" {
		return fmt.Errorf("the API's rollout %s lists the members (-want +got):\n%s", ro.ID, d)
	}
	return nil
}

// membersShown runs `flotilla describe rollout` of that commit and reads
// its Members line, then opens the rollout's page in the web UI and reads
// its members.
func (s *scenario) membersShown(ctx context.Context, members string) error {
	id, err := s.rolloutID(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, flotillaBin, "describe", "rollout", id, "--server", s.w.flotilla.url())
	cmd.Env = s.cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("flotilla describe rollout %s: %w: %s", id, err, out)
	}
	want := "Members:      " + strings.ReplaceAll(members, ",", " -> ") + "\n"
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("flotilla describe rollout %s prints no %q:\n%s", id, want, out)
	}
	b, _, err := s.openRollout(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return err
	}
	ui := strings.ReplaceAll(members, ",", " → ")
	return b.until(ctx, uiWait, "the rollout's members "+ui, fmt.Sprintf(`document.querySelector('#members') && document.querySelector('#members').textContent === %q`, ui))
}

// jobRan reads the Job in every cluster: the commit's revision on its pod
// template, its greeting, and complete.
func (s *scenario) jobRan(ctx context.Context, name, which, greeting string) error {
	want := s.w.git.url + "@" + s.w.git.commits[map[string]string{"that": "that", "the first": "first"}[which]]
	for _, c := range s.w.clusters {
		j, err := c.Kube.BatchV1().Jobs(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the Job %s in %s: %w", name, c.Name, err)
		}
		if got := j.Spec.Template.Annotations[canary.AnnotationRevision]; got != want {
			return fmt.Errorf("the Job %s in %s ran revision %q, want %q", name, c.Name, got, want)
		}
		if got := j.Spec.Template.Spec.Containers[0].Env; len(got) == 0 || got[0].Value != greeting {
			return fmt.Errorf("the Job %s in %s greets %v, want %q", name, c.Name, got, greeting)
		}
		complete := slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
		})
		if !complete {
			return fmt.Errorf("the Job %s in %s is not complete: %v", name, c.Name, j.Status.Conditions)
		}
	}
	return nil
}

// jobFailsAtThatCommit polls the Job in cluster (every 100 ms, for up to
// 2 minutes: the rollback replaces it with the first commit's Job soon
// after) until it runs that commit and failed, and keeps its reason.
func (s *scenario) jobFailsAtThatCommit(ctx context.Context, name, clusterName string) error {
	c, err := s.clientsFor(clusterName)
	if err != nil {
		return err
	}
	want := s.w.git.url + "@" + s.w.git.commits["that"]
	deadline := time.Now().Add(2 * time.Minute)
	for {
		j, err := c.Kube.BatchV1().Jobs(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && j.Spec.Template.Annotations[canary.AnnotationRevision] == want {
			if st := cluster.JobStatusOf(j); st.Failed {
				s.w.set.jobFailure = st.Reason
				fmt.Printf("the Job %s in %s failed: %s\n", name, clusterName, st.Reason)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Job %s in %s did not fail at %s within 2 minutes (last read: %v)", name, clusterName, want, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rolloutShowsJobFailed reads the rollout of that commit in the API and
// `flotilla describe rollout`: the cluster's Job failed with the reason
// the Job gave (jobFailsAtThatCommit).
func (s *scenario) rolloutShowsJobFailed(ctx context.Context, clusterName, job string) error {
	reason := s.w.set.jobFailure
	if reason == "" {
		return errors.New("no Job's reason read: the step reading the Job comes first")
	}
	want := "failed: " + reason
	ro, err := s.rolloutOfThatCommit(ctx)
	if err != nil {
		return err
	}
	cl, _, err := ro.Cluster(clusterName)
	if err != nil {
		return err
	}
	if got := cl.Jobs[job]; got != want {
		return fmt.Errorf("the API's rollout %s says the Job %s in %s is %q, want %q (its jobs: %v)", ro.ID, job, clusterName, got, want, cl.Jobs)
	}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, flotillaBin, "describe", "rollout", ro.ID, "--server", s.w.flotilla.url())
	cmd.Env = s.cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("flotilla describe rollout %s: %w: %s", ro.ID, err, out)
	}
	if err := describeJob(string(out), ro.ID, clusterName, job+"="+want); err != nil {
		return err
	}
	return s.uiClusterJobs(ctx, []string{clusterName}, job+" "+want)
}

// describeJob finds in the output of `flotilla describe rollout id` the
// row of clusterName and in it the Job's state want ("<job>=<state>").
func describeJob(out, id, clusterName, want string) error {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && slices.Contains(f[:3], clusterName) {
			if strings.Contains(line, want) {
				return nil
			}
			return fmt.Errorf("flotilla describe rollout %s prints for %s no %q:\n%s", id, clusterName, want, out)
		}
	}
	return fmt.Errorf("flotilla describe rollout %s prints no row of %s:\n%s", id, clusterName, out)
}

// uiClusterJobs opens the page of the rollout of that commit in the
// browser: the card of each of clusters has the jobs line jobs
// ("<job> <state>").
func (s *scenario) uiClusterJobs(ctx context.Context, clusters []string, jobs string) error {
	b, id, err := s.openRollout(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return err
	}
	for _, c := range clusters {
		line := fmt.Sprintf(`document.querySelector('li.cluster[data-cluster=%q] .line.jobs span:last-child')`, c)
		if err := b.until(ctx, uiWait, "rollout "+id+"'s card of "+c+" says jobs "+jobs, line+" && "+line+".textContent === "+strconv.Quote(jobs)); err != nil {
			return err
		}
	}
	return b.shot(ctx, "set-jobs")
}

// uiJobsComplete reads the Job of that commit complete in every cluster
// (the cluster's Job itself: jobRan) and the same on the web UI's card of
// each cluster of the rollout.
func (s *scenario) uiJobsComplete(ctx context.Context, job, greeting string) error {
	if err := s.jobRan(ctx, job, "that", greeting); err != nil {
		return err
	}
	var names []string
	for _, c := range s.w.clusters {
		names = append(names, c.Name)
	}
	return s.uiClusterJobs(ctx, names, job+" complete")
}

// setFrozen gives the scenario's application, which becomes the set's
// rollout fields (setRolloutFields), a freeze window that began a second
// ago and lasts n seconds: the set's releaseSets[].freezeWindows.
func (s *scenario) setFrozen(name string, n int) error {
	if s.w == nil || s.w.set == nil {
		return errors.New("no release set: the repository step comes first")
	}
	start := time.Now().UTC().Add(-time.Second).Truncate(time.Second)
	d := time.Duration(n) * time.Second
	s.w.set.frozenUntil = start.Add(d)
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["applications"].([]map[string]any)[0]["freezeWindows"] = []map[string]any{{
			"name": name, "rrule": "DTSTART:" + start.Format("20060102T150405Z") + "\nRRULE:FREQ=YEARLY;COUNT=1", "duration": d.String(),
		}}
		return nil
	})
	return nil
}

// pushFirstToSet delivers the push of the repository's first commit, which
// is then "that" commit.
func (s *scenario) pushFirstToSet(ctx context.Context) error {
	first := s.w.git.commits["first"]
	s.w.git.commits["that"] = first
	return s.deliverGitPush(ctx, strings.Repeat("0", 40), first, nil)
}

func (s *scenario) thatCommitWaitsForFreeze(ctx context.Context, window string) error {
	return s.waitsForFreeze(ctx, commitVersion(s.w.git.commits["that"]), window)
}

// nothingBeforeThaw reads the watch (every member's workload and primary)
// and each cluster's Job: none ran that commit before the set's freeze
// window ended.
func (s *scenario) nothingBeforeThaw(ctx context.Context) error {
	w, rs := s.w.git.workloads, s.w.set
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	for _, c := range s.w.clusters {
		for _, d := range []string{rs.api, rs.api + "-primary", rs.frontend, rs.frontend + "-primary"} {
			at, ok := w.firstSeen(c.Name, d, rev)
			if !ok {
				return fmt.Errorf("the watch never saw %s in %s run %s", d, c.Name, rev)
			}
			if at.Before(rs.frozenUntil) {
				return fmt.Errorf("%s in %s ran %s at %s, before the set's freeze window ended (%s)", d, c.Name, rev, at.Format(time.RFC3339Nano), rs.frozenUntil.Format(time.RFC3339))
			}
		}
		j, err := c.Kube.BatchV1().Jobs(s.w.namespace).Get(ctx, rs.job, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the Job %s in %s: %w", rs.job, c.Name, err)
		}
		if j.CreationTimestamp.Time.Before(rs.frozenUntil.Add(-time.Second)) { // creation times are whole seconds
			return fmt.Errorf("the Job %s in %s was created at %s, before the set's freeze window ended (%s)", rs.job, c.Name, j.CreationTimestamp.Format(time.RFC3339), rs.frozenUntil.Format(time.RFC3339))
		}
	}
	return nil
}

// primaryRanAfter reads the watch: in cluster, later's primary ran that
// commit, and not before earlier's did.
func (s *scenario) primaryRanAfter(cluster, later, earlier string) error {
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	lateAt, ok := w.firstSeen(cluster, later+"-primary", rev)
	if !ok {
		return fmt.Errorf("the watch never saw %s-primary in %s run %s", later, cluster, rev)
	}
	earlyAt, ok := w.firstSeen(cluster, earlier+"-primary", rev)
	if !ok {
		return fmt.Errorf("the watch never saw %s-primary in %s run %s", earlier, cluster, rev)
	}
	if lateAt.Before(earlyAt) {
		return fmt.Errorf("in %s %s-primary ran %s at %s, before %s-primary (%s)", cluster, later, rev, lateAt.Format(time.RFC3339Nano), earlier, earlyAt.Format(time.RFC3339Nano))
	}
	return nil
}

// failedAndNeverRan reads Flagger's events of the failing canary in
// cluster and, from the watch, that the dependent's workload never ran
// that commit there (it was never applied).
func (s *scenario) failedAndNeverRan(ctx context.Context, cluster, failing, dependent string) error {
	evs, err := s.canaryEvents(ctx, cluster, failing)
	if err != nil {
		return err
	}
	if want := corev1.EventTypeWarning + ": Canary failed! Scaling down " + failing + "." + s.w.namespace; !hasEvent(evs, want) {
		return fmt.Errorf("Flagger in %s did not fail the canary %s: its events are %q", cluster, failing, evs)
	}
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	for _, d := range []string{dependent, dependent + "-primary"} {
		if at, ok := w.firstSeen(cluster, d, rev); ok {
			return fmt.Errorf("%s in %s ran %s at %s, though %s failed there", d, cluster, rev, at.Format(time.RFC3339Nano), failing)
		}
	}
	return nil
}

// neverAhead replays, per cluster, what the watch saw of both primaries
// in the order it saw it: at no point did dependent's primary run that
// commit while dependency's ran another.
func (s *scenario) neverAhead(dependent, dependency string) error {
	w := s.w.git.workloads
	if w == nil {
		return errors.New("the workloads are not watched: the watching step comes first")
	}
	rev := s.w.git.url + "@" + s.w.git.commits["that"]
	type change struct {
		deployment, revision string
		at                   time.Time
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range s.w.clusters {
		var changes []change
		for _, d := range []string{dependent + "-primary", dependency + "-primary"} {
			for _, r := range w.seen[c.Name+"/"+d] {
				changes = append(changes, change{d, r.revision, r.at})
			}
		}
		sort.SliceStable(changes, func(i, j int) bool { return changes[i].at.Before(changes[j].at) })
		runs := map[string]string{}
		for _, ch := range changes {
			runs[ch.deployment] = ch.revision
			if runs[dependent+"-primary"] == rev && runs[dependency+"-primary"] != rev {
				return fmt.Errorf("in %s at %s %s-primary ran %s while %s-primary ran %q", c.Name, ch.at.Format(time.RFC3339Nano), dependent, rev, dependency, runs[dependency+"-primary"])
			}
		}
	}
	return nil
}

// setInProject puts the release set in project, listing the set's name
// alone, its approver the API token approver; project other (listing no
// application) has its own approver. The scenario's own token
// (server.apiToken, "default") is admin in every project.
func (s *scenario) setInProject(set, project, approver, other, otherApprover string) error {
	for _, n := range []string{approver, otherApprover} {
		if err := s.namedToken(n); err != nil {
			return err
		}
	}
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["projects"] = []map[string]any{
			{"name": project, "applications": []string{set}, "roles": []map[string]any{{"name": "approver", "subjects": []string{"token:" + approver}}}},
			{"name": other, "roles": []map[string]any{{"name": "approver", "subjects": []string{"token:" + otherApprover}}}},
		}
		cfg["rbac"] = map[string]any{"policy": "g, token:default, role:admin, *\n"}
		return nil
	})
	return nil
}

func (s *scenario) waveNeedsOne(wave int) error {
	s.wavePolicy(wave, "approvals", 1)
	return nil
}

// thatCommitWaitsForApproval waits (up to 2 minutes: wave 1 runs first)
// until the API says the rollout of that commit waits for wave's
// approval.
func (s *scenario) thatCommitWaitsForApproval(ctx context.Context, wave int) error {
	version := commitVersion(s.w.git.commits["that"])
	deadline := time.Now().Add(2 * time.Minute)
	for {
		id, err := s.rolloutID(ctx, version)
		if err == nil {
			var ro struct{ Waiting string }
			if err = s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err == nil {
				if strings.HasPrefix(ro.Waiting, fmt.Sprintf("wave %d ", wave)) && strings.Contains(ro.Waiting, "approval") {
					return nil
				}
				err = fmt.Errorf("it waits %q", ro.Waiting)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the rollout of %s did not wait for the approval of wave %d: %w", version, wave, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *scenario) thatCommitApprovalRefused(ctx context.Context, who string, wave int, why string) error {
	return s.approvalRefused(ctx, who, wave, commitVersion(s.w.git.commits["that"]), why)
}

func (s *scenario) thatCommitApproved(ctx context.Context, who string, wave int) error {
	return s.auditApprove(ctx, who, wave, commitVersion(s.w.git.commits["that"]), "features")
}

// noMemberIn waits n seconds, then reads the cluster: neither a member's
// Deployment nor the Job exists there (the wave was not released).
func (s *scenario) noMemberIn(ctx context.Context, clusterName string, n int) error {
	c, err := s.clientsFor(clusterName)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(n) * time.Second):
	}
	rs := s.w.set
	for _, d := range []string{rs.api, rs.frontend} {
		if _, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, d, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("the Deployment %s is in %s, though its wave was not approved", d, clusterName)
		} else if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading the Deployment %s in %s: %w", d, clusterName, err)
		}
	}
	if _, err := c.Kube.BatchV1().Jobs(s.w.namespace).Get(ctx, rs.job, metav1.GetOptions{}); err == nil {
		return fmt.Errorf("the Job %s is in %s, though its wave was not approved", rs.job, clusterName)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading the Job %s in %s: %w", rs.job, clusterName, err)
	}
	return nil
}
