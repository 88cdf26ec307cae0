package features

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/canary"
)

func (s *scenario) registerGitSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a deployments repository with the chart "([^"]*)" and values for clusters "([^"]*)"$`, s.chartRepository)
	sc.Step(`^flotilla serving the git application "([^"]*)" from that chart in waves "([^"]*)" then "([^"]*)"$`, s.flotillaServingGit)
	sc.Step(`^flotilla is configured for the git application "([^"]*)" from that chart in waves "([^"]*)" then "([^"]*)"$`, s.configureGit)
	sc.Step(`^the repository's first commit has been rolled out to every cluster$`, s.firstCommitRolledOut)
	sc.Step(`^a push changes "([^"]*)" to "([^"]*)" in "([^"]*)"$`, s.pushValue)
	sc.Step(`^a push changes only "([^"]*)"$`, s.pushFile)
	sc.Step(`^the rollout of that commit (succeeds|is rolled back)$`, s.commitRolloutEnds)
	sc.Step(`^the primary in cluster "([^"]*)" runs (that|the first) commit, greeting "([^"]*)"$`, s.primaryRunsCommit)
	sc.Step(`^the primary and the workload in every cluster run (that|the first) commit, greeting "([^"]*)"$`, s.everyClusterRuns)
	sc.Step(`^flotilla records that the push was skipped because "([^"]*)"$`, s.gitPushSkipped)
	sc.Step(`^no rollout of that commit was started$`, s.noRolloutOfThatCommit)
	sc.Step(`^a push of a commit that is not on the branch is delivered$`, s.pushForeignCommit)
	sc.Step(`^flotilla rejects the git push because "([^"]*)"$`, s.gitPushRejected)
	sc.Step(`^the application allows only images matching "([^"]*)"$`, s.allowOnlyImages)
	sc.Step(`^the rollout of that commit fails because "([^"]*)"$`, s.commitRolloutFails)
}

// gitRepo is a scenario's deployments repository: a bare repository and
// a clone the scenario commits in; commits records them by name ("first",
// "that").
type gitRepo struct {
	bare, work string
	commits    map[string]string
	chart      string
	// url is the application's source.git.url: "file://" + bare, or the
	// repository's URL on the local Gitea.
	url string
	// gitea is the repository on the local Gitea, whose own push webhook
	// delivers the pushes, when a step made it there (bare is then
	// empty): the steps push with git and deliver nothing themselves.
	gitea *giteaPushes
	// workloads records the revisions the application's Deployments ran
	// in each cluster, when a step watches them.
	workloads *workloadWatch
	// allowedImages is the application's source.git.allowedImages, when
	// a step set it.
	allowedImages []string
	// noPrune sets the application's source.git.prune false; watch
	// records what happened to ConfigMaps in the clusters (prune steps).
	noPrune bool
	watch   *configMapWatch
}

// The chart of the scenarios' deployments repository: a Deployment whose
// GREETING comes from the values.
const (
	gitChart = "apiVersion: v2\nname: %s\nversion: 0.1.0\n"
	// greeting comes from the values; the image does not matter (kwok runs
	// the pods).
	gitChartValues     = "greeting: hello\nreplicaCount: 1\nimage: registry.example.com/podinfo:6.0.0\n"
	gitChartDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
  labels: {app: {{ .Release.Name }}}
spec:
  replicas: {{ .Values.replicaCount }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels: {app: {{ .Release.Name }}}
    spec:
      containers:
        - name: {{ .Chart.Name }}
          image: {{ .Values.image | quote }}
          ports:
            - {name: http, containerPort: 9898}
          env:
            - name: GREETING
              value: {{ .Values.greeting | quote }}
`
)

func (s *scenario) chartRepository(ctx context.Context, chart, clusters string) error {
	if s.w == nil {
		if err := s.aRegistry(); err != nil { // the scenario's directory (its registry goes unused)
			return err
		}
	}
	r := &gitRepo{bare: filepath.Join(s.w.dir, "deployments.git"), work: filepath.Join(s.w.dir, "work"), commits: map[string]string{}, chart: chart}
	r.url = "file://" + r.bare
	if _, err := git(ctx, s.w.dir, "init", "--bare", "--initial-branch=main", r.bare); err != nil {
		return err
	}
	if _, err := git(ctx, s.w.dir, "clone", r.bare, r.work); err != nil {
		return err
	}
	if err := r.commitFirst(ctx, clusters); err != nil {
		return err
	}
	if _, err := git(ctx, r.work, "push", "origin", "main"); err != nil {
		return err
	}
	s.w.git = r
	return nil
}

// commitFirst commits the chart and each cluster's values file in the work
// tree, on main, as the "first" commit (not pushed).
func (r *gitRepo) commitFirst(ctx context.Context, clusters string) error {
	chart := r.chart
	files := map[string]string{
		"README.md":                                  "# deployments\n",
		"charts/" + chart + "/Chart.yaml":            fmt.Sprintf(gitChart, chart),
		"charts/" + chart + "/values.yaml":           gitChartValues,
		"charts/" + chart + "/templates/deploy.yaml": gitChartDeployment,
	}
	for _, c := range strings.Split(clusters, ",") {
		files["clusters/"+c+"/"+chart+"/values.yaml"] = "# " + c + "'s values\nreplicaCount: 1\n"
	}
	for p, content := range files {
		if err := writeFile(filepath.Join(r.work, p), content); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"checkout", "-B", "main"}, {"add", "."}, {"commit", "-m", "first"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	return nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// flotillaServingGit serves the application from the repository's chart,
// with each cluster's values file; the namespace exists in every cluster
// (the first commit creates the workload).
func (s *scenario) flotillaServingGit(ctx context.Context, app, wave1, wave2 string) error {
	if err := s.configureGit(ctx, app, wave1, wave2); err != nil {
		return err
	}
	return s.w.flotilla.start(ctx)
}

// configureGit writes the config of the git application (and makes its
// namespace in the waves' clusters) without starting flotilla.
func (s *scenario) configureGit(ctx context.Context, app, wave1, wave2 string) error {
	r := s.w.git
	s.w.gitSource = map[string]any{
		"url": r.url, "branch": "main", "render": "helm",
		"helm": map[string]any{"chart": "charts/" + r.chart, "valuesFile": "clusters/{cluster}/" + r.chart + "/values.yaml"},
	}
	if r.allowedImages != nil {
		s.w.gitSource["allowedImages"] = r.allowedImages
	}
	if r.noPrune {
		s.w.gitSource["prune"] = false
	}
	if err := s.configure(ctx, app, "unused", "MinorVersion", wave1, wave2); err != nil {
		return err
	}
	return s.makeNamespace(ctx)
}

// makeNamespace makes the scenario's namespace in every cluster of the
// waves (a git application's first commit creates its workloads there),
// deleted after the scenario.
func (s *scenario) makeNamespace(ctx context.Context) error {
	for _, c := range s.w.clusters {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.w.namespace}}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace in %s: %w", c.Name, err)
		}
		s.onCleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = c.Kube.CoreV1().Namespaces().Delete(ctx, s.w.namespace, metav1.DeleteOptions{})
		})
	}
	return nil
}

// commitVersion is how a rollout names a commit of the branch.
func commitVersion(commit string) string { return "main@" + commit[:12] }

// deliverGitPush delivers GitHub's push webhook of before..after on main,
// listing the files the commit changed.
func (s *scenario) deliverGitPush(ctx context.Context, before, after string, changed []string) error {
	if changed == nil {
		changed = []string{}
	}
	push := map[string]any{
		"ref": "refs/heads/main", "before": before, "after": after, "created": false, "deleted": false,
		"commits":    []map[string]any{{"id": after, "added": []string{}, "removed": []string{}, "modified": changed}},
		"repository": map[string]any{"full_name": "platform/deployments", "clone_url": s.w.git.url},
		"pusher":     map[string]any{"name": "dev"}, "sender": map[string]any{"login": "dev"},
	}
	body, err := json.Marshal(push)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, []byte(s.w.githubSecret))
	mac.Write(body)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-GitHub-Event", "push")
	h.Set("X-GitHub-Delivery", "push-"+after[:12]+"-"+randomHex(4))
	h.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	code, err := s.post(ctx, "/hooks/github", h, body)
	if err == nil && code != http.StatusAccepted {
		err = fmt.Errorf("the push was answered %d, want 202", code)
	}
	return err
}

// firstCommitRolledOut delivers the push of the first commit (on the
// local Gitea: pushes it there, and Gitea delivers it) and waits for its
// rollout.
func (s *scenario) firstCommitRolledOut(ctx context.Context) error {
	first := s.w.git.commits["first"]
	if s.w.git.gitea != nil {
		if _, err := git(ctx, s.w.git.work, "push", "origin", "main"); err != nil {
			return err
		}
	} else if err := s.deliverGitPush(ctx, strings.Repeat("0", 40), first, nil); err != nil {
		return err
	}
	return s.rolloutSucceeds(ctx, commitVersion(first))
}

// commit commits the work tree's changes to path, pushes them and
// delivers the push (on the local Gitea, Gitea delivers it); the commit
// is "that" commit.
func (s *scenario) commit(ctx context.Context, path, message string) error {
	r := s.w.git
	before, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	for _, args := range [][]string{{"add", path}, {"commit", "-m", message}, {"push", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["that"] = strings.TrimSpace(head)
	if r.gitea != nil {
		return nil
	}
	return s.deliverGitPush(ctx, strings.TrimSpace(before), r.commits["that"], []string{path})
}

func (s *scenario) pushValue(ctx context.Context, key, value, path string) error {
	file := filepath.Join(s.w.git.work, path)
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var values map[string]any
	if err := yaml.Unmarshal(b, &values); err != nil {
		return err
	}
	if values == nil {
		values = map[string]any{}
	}
	values[key] = value
	if b, err = yaml.Marshal(values); err != nil {
		return err
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		return err
	}
	return s.commit(ctx, path, "set "+key+" in "+path)
}

func (s *scenario) pushFile(ctx context.Context, path string) error {
	file := filepath.Join(s.w.git.work, path)
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, append(b, []byte("More words.\n")...), 0o644); err != nil {
		return err
	}
	return s.commit(ctx, path, "edit "+path)
}

func (s *scenario) commitRolloutEnds(ctx context.Context, how string) error {
	version := commitVersion(s.w.git.commits["that"])
	if how == "succeeds" {
		return s.rolloutSucceeds(ctx, version)
	}
	return s.rolloutRolledBack(ctx, version)
}

// runs checks that deployment in cluster runs commit (its revision) with
// the greeting.
func (s *scenario) runs(ctx context.Context, cluster, deployment, commit, greeting string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading %s in %s: %w", deployment, cluster, err)
	}
	want := s.w.git.url + "@" + commit
	if got := d.Spec.Template.Annotations[canary.AnnotationRevision]; got != want {
		return fmt.Errorf("%s in %s runs revision %q, want %q", deployment, cluster, got, want)
	}
	// The greeting must be there: a render that dropped the values' env
	// (GREETING missing) used to pass this check (#32).
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "GREETING" {
			if e.Value != greeting {
				return fmt.Errorf("%s in %s greets %q, want %q", deployment, cluster, e.Value, greeting)
			}
			return nil
		}
	}
	return fmt.Errorf("%s in %s has no GREETING variable, want %q", deployment, cluster, greeting)
}

func (s *scenario) primaryRunsCommit(ctx context.Context, cluster, which, greeting string) error {
	name := map[string]string{"that": "that", "the first": "first"}[which]
	return s.runs(ctx, cluster, s.w.workload+"-primary", s.w.git.commits[name], greeting)
}

func (s *scenario) everyClusterRuns(ctx context.Context, which, greeting string) error {
	name := map[string]string{"that": "that", "the first": "first"}[which]
	for _, c := range s.w.clusters {
		for _, d := range []string{s.w.workload + "-primary", s.w.workload} {
			if err := s.runs(ctx, c.Name, d, s.w.git.commits[name], greeting); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *scenario) gitPushSkipped(ctx context.Context, reason string) error {
	_, err := s.w.sink.waitFor(ctx, "the push skipped", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutSkipped {
			return false
		}
		p, err := events.Decode[events.RolloutSkipped](e)
		return err == nil && p.Application == s.w.app && strings.Contains(p.Reason, reason)
	})
	return err
}

func (s *scenario) noRolloutOfThatCommit() error {
	return s.noRollout(commitVersion(s.w.git.commits["that"]))
}

// pushForeignCommit commits on a branch of its own and delivers a push
// claiming that commit is main's head.
func (s *scenario) pushForeignCommit(ctx context.Context) error {
	r := s.w.git
	before, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(r.work, "clusters", "c1", r.chart, "values.yaml"), "greeting: unreviewed\n"); err != nil {
		return err
	}
	for _, args := range [][]string{{"checkout", "-b", "unreviewed"}, {"commit", "-am", "not on main"}, {"push", "origin", "unreviewed"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["that"] = strings.TrimSpace(head)
	return s.deliverGitPush(ctx, strings.TrimSpace(before), r.commits["that"], []string{"clusters/c1/" + r.chart + "/values.yaml"})
}

func (s *scenario) gitPushRejected(ctx context.Context, reason string) error {
	_, err := s.w.sink.waitFor(ctx, "the git push rejected", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeGitRejected {
			return false
		}
		p, err := events.Decode[events.GitRejected](e)
		return err == nil && p.Commit == s.w.git.commits["that"] && strings.Contains(p.Reason, reason)
	})
	return err
}

func (s *scenario) allowOnlyImages(pattern string) error {
	s.w.git.allowedImages = []string{pattern}
	return nil
}

func (s *scenario) commitRolloutFails(ctx context.Context, reason string) error {
	id, err := s.rolloutID(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return err
	}
	_, err = s.w.sink.waitFor(ctx, "rollout "+id+" failed", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeRolloutFailed || events.RolloutID(e) != id {
			return false
		}
		p, err := events.Decode[events.RolloutResult](e)
		return err == nil && strings.Contains(p.Reason, reason)
	})
	return err
}
