package features

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	helmregistry "helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/canary"
)

func (s *scenario) registerKubeCDSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a deployments repository with KubeCD's example files, environment "([^"]*)" in cluster "([^"]*)" then "([^"]*)" in cluster "([^"]*)", and releases of charts from a Helm repository and an OCI registry served by the test$`, s.kubecdRepository)
	sc.Step(`^flotilla serving that repository's KubeCD files$`, s.flotillaServingKubeCD)
	sc.Step(`^the repository's first commit is pushed$`, s.kubecdFirstPush)
	sc.Step(`^every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed$`, s.kubecdRolloutsSucceed)
	sc.Step(`^every release's rollout of that commit is rolled back, staging's cluster promoted before prod's changed$`, func(ctx context.Context) error {
		return s.kubecdRolloutsEnd(ctx, events.TypeRolloutRolledBack)
	})
	sc.Step(`^in clusters "([^"]*)" the primaries run that commit: (.*)$`, s.kubecdPrimariesRun)
	sc.Step(`^in clusters "([^"]*)" the primaries run the first commit: (.*)$`, func(ctx context.Context, clusters, list string) error {
		return s.kubecdPrimariesRunCommit(ctx, clusters, list, s.w.git.commits["first"])
	})
	sc.Step(`^in clusters "([^"]*)" the Deployment "([^"]*)" runs "([^"]*)" and the ConfigMap "([^"]*)" exists$`, s.kubecdExtraObjects)
	sc.Step(`^a push sets "([^"]*)" of release "([^"]*)" to "([^"]*)" in "([^"]*)"$`, s.kubecdPushValue)
	sc.Step(`^the image "([^"]*)" of the repository's values is the scenario's registry's$`, s.kubecdImageInRegistry)
	sc.Step(`^tag "([^"]*)" of "([^"]*)" is pushed to the scenario's registry$`, s.kubecdPushTag)
	sc.Step(`^flotilla skips tag "([^"]*)" for release "([^"]*)" because "([^"]*)", and the deployments repository stays as it was$`, s.kubecdTagSkipped)
	sc.Step(`^the deployments repository's branch "main" has one new commit by flotilla, setting "([^"]*)" of release "([^"]*)" to "([^"]*)" in "([^"]*)" and nothing else$`, s.kubecdTriggerCommitted)
}

// kubecdState is the scenario's KubeCD repository: its releases, the
// namespace its environments use, the waves' clusters.
type kubecdState struct {
	namespace string
	releases  []string
	waves     []string // the clusters, staging's first
}

// kubecdChart packages a chart whose Deployment (named after the release)
// runs image, for the Helm repository and the OCI registry.
func kubecdChart(dir, name, version, image string) ([]byte, error) {
	src := filepath.Join(dir, "src-"+name)
	files := map[string]string{
		"Chart.yaml":                fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version),
		"values.yaml":               "image: " + image + "\n",
		"templates/deployment.yaml": gitChartDeployment,
	}
	for p, c := range files {
		if err := writeFile(filepath.Join(src, p), c); err != nil {
			return nil, err
		}
	}
	// gitChartDeployment reads greeting and replicaCount too.
	if err := writeFile(filepath.Join(src, "values.yaml"), "image: "+image+"\ngreeting: hello\nreplicaCount: 1\n"); err != nil {
		return nil, err
	}
	ch, err := loader.Load(src)
	if err != nil {
		return nil, err
	}
	tgz, err := chartutil.Save(ch, dir)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(tgz)
}

func (s *scenario) kubecdRepository(ctx context.Context, env1, c1, env2, c2 string) error {
	if s.w == nil {
		if err := s.aRegistry(); err != nil {
			return err
		}
	}
	w := s.w
	k := &kubecdState{namespace: "kcd-" + randomHex(4), waves: []string{c1, c2}}
	w.kubecd = k
	// A Helm repository (index.yaml and the archive) and an OCI registry,
	// both served by the test.
	web, err := kubecdChart(w.dir, "web", "1.0.0", "registry.example.com/web:1.0.0")
	if err != nil {
		return err
	}
	repo := httptest.NewServer(helmIndex{"web", "1.0.0", web})
	s.onCleanup(repo.Close)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	s.onCleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	api, err := kubecdChart(w.dir, "api", "2.0.0", "registry.example.com/api:2.0.0")
	if err != nil {
		return err
	}
	hc, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP(), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		return err
	}
	if _, err := hc.Push(api, host+"/charts/api:2.0.0"); err != nil {
		return fmt.Errorf("pushing the api chart: %w", err)
	}

	r := &gitRepo{bare: filepath.Join(w.dir, "deployments.git"), work: filepath.Join(w.dir, "work"), commits: map[string]string{}}
	r.url = "file://" + r.bare
	if _, err := git(ctx, w.dir, "init", "--bare", "--initial-branch=main", r.bare); err != nil {
		return err
	}
	if _, err := git(ctx, w.dir, "clone", r.bare, r.work); err != nil {
		return err
	}
	// KubeCD's example, as config/examples/kubecd has it (the seed's
	// releases.yaml verbatim), with this fleet's environments.
	example := filepath.Join("..", "config", "examples", "kubecd")
	if err := os.CopyFS(r.work, os.DirFS(example)); err != nil {
		return err
	}
	files := map[string]string{
		"environments.yaml": fmt.Sprintf(`environments:
  - name: %[1]s
    clusterName: %[2]s
    kubeNamespace: %[5]s
    releasesFiles: [./analytics/releases.yaml, ./refs.yaml]
    defaultValues:
      - {key: ingress.domain, value: %[1]s.example.com}
  - name: %[3]s
    clusterName: %[4]s
    kubeNamespace: %[5]s
    releasesFiles: [./analytics/releases.yaml, ./refs.yaml]
    defaultValues:
      - {key: ingress.domain, value: %[3]s.example.com}
clusters:
  - {name: %[2]s, provider: {existingContext: {contextName: %[2]s}}}
  - {name: %[4]s, provider: {existingContext: {contextName: %[4]s}}}
helmRepos:
  - {name: local, url: "%[6]s"}
`, env1, c1, env2, c2, k.namespace, repo.URL),
		"refs.yaml": fmt.Sprintf(`releases:
  - name: web
    chart: {reference: local/web, version: 1.0.0}
  - name: api
    chart: {reference: "oci://%s/charts/api", version: 2.0.0}
`, host),
		// The seed names the resource file without its content: a
		// namespaced object, so scenarios sharing the fleet do not meet.
		"analytics/storage-fast.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: storage-fast}\ndata: {class: fast}\n",
	}
	for p, content := range files {
		if err := writeFile(filepath.Join(r.work, p), content); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(r.work, "base")); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(r.work, "analytics", "airflow-releases.yaml"))
	for _, args := range [][]string{{"checkout", "-b", "main"}, {"add", "."}, {"commit", "-m", "first"}, {"push", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	w.git = r
	k.releases = []string{"clickhouse", "kafkaesque", "kafka", "web", "api"}
	return nil
}

// helmIndex serves a Helm repository of one chart version.
type helmIndex struct {
	name, version string
	archive       []byte
}

func (h helmIndex) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	file := h.name + "-" + h.version + ".tgz"
	switch r.URL.Path {
	case "/index.yaml":
		fmt.Fprintf(w, "apiVersion: v1\nentries:\n  %s:\n    - {name: %s, version: %s, digest: %s, urls: [%s]}\n", h.name, h.name, h.version, fmt.Sprintf("%x", sha256.Sum256(h.archive)), file)
	case "/" + file:
		_, _ = w.Write(h.archive)
	default:
		http.NotFound(w, r)
	}
}

// flotillaServingKubeCD serves kubecd.dir = the repository's clone, the
// environments making the waves (no fleet.waves), every release's canary
// with the scenario's delivery (gate, report).
func (s *scenario) flotillaServingKubeCD(ctx context.Context) error {
	w, k := s.w, s.w.kubecd
	w.configEdits = append(w.configEdits, func(cfg map[string]any) error {
		apps := cfg["applications"].([]map[string]any)
		tmpl := map[string]any{
			"service":  apps[0]["service"],
			"delivery": apps[0]["delivery"],
			"source":   map[string]any{"git": map[string]any{"url": w.git.url, "branch": "main"}},
		}
		delete(cfg, "applications")
		delete(cfg["fleet"].(map[string]any), "waves")
		cfg["kubecd"] = map[string]any{"dir": w.git.work, "application": tmpl}
		return nil
	})
	if err := s.configure(ctx, k.releases[0], "unused", "MinorVersion", k.waves[0], k.waves[1]); err != nil {
		return err
	}
	w.namespace = k.namespace
	w.flotilla.env = append(w.flotilla.env, "FLOTILLA_CHART_CACHE="+filepath.Join(w.dir, "charts"))
	for _, c := range w.clusters {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.namespace}}
		if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace in %s: %w", c.Name, err)
		}
		s.onCleanup(func() {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_ = c.Kube.CoreV1().Namespaces().Delete(ctx, k.namespace, metav1.DeleteOptions{})
		})
	}
	return w.flotilla.start(ctx)
}

func (s *scenario) kubecdFirstPush(ctx context.Context) error {
	first := s.w.git.commits["first"]
	s.w.git.commits["that"] = first
	return s.deliverGitPush(ctx, strings.Repeat("0", 40), first, nil)
}

// kubecdRolloutsSucceed waits for every release's rollout of that commit
// to succeed, and checks from the events that wave 2 (prod's cluster)
// started only after wave 1's cluster succeeded.
func (s *scenario) kubecdRolloutsSucceed(ctx context.Context) error {
	return s.kubecdRolloutsEnd(ctx, events.TypeRolloutSucceeded)
}

// kubecdRolloutsEnd is kubecdRolloutsSucceed for an end of type want.
func (s *scenario) kubecdRolloutsEnd(ctx context.Context, want string) error {
	version := commitVersion(s.w.git.commits["that"])
	k := s.w.kubecd
	for _, rel := range k.releases {
		e, err := s.w.sink.waitFor(ctx, "rollout of "+rel+" started", func(e cloudevents.Event) bool {
			p, err := events.Decode[events.RolloutStarted](e)
			return e.Type() == events.TypeRolloutStarted && err == nil && p.Application == rel && p.Tag == version
		})
		if err != nil {
			return err
		}
		p, _ := events.Decode[events.RolloutStarted](e)
		id := p.RolloutID
		end, err := s.w.sink.waitFor(ctx, "end of rollout "+id, func(e cloudevents.Event) bool {
			return (e.Type() == events.TypeRolloutSucceeded || e.Type() == events.TypeRolloutRolledBack) && events.RolloutID(e) == id
		})
		if err != nil {
			return err
		}
		if end.Type() != want {
			return fmt.Errorf("rollout of %s ended %s, want %s: %s", rel, end.Type(), want, end.Data())
		}
		// The order of the waves: staging's cluster succeeded before
		// prod's wave started.
		var firstDone, secondStarted time.Time
		for _, ev := range s.w.sink.all() {
			if events.RolloutID(ev) != id {
				continue
			}
			data := string(ev.Data())
			switch {
			case ev.Type() == events.TypeClusterSucceeded && strings.Contains(data, `"cluster":"`+k.waves[0]+`"`):
				firstDone = ev.Time()
			case ev.Type() == events.TypeWaveStarted && strings.Contains(data, `"`+k.waves[1]+`"`):
				secondStarted = ev.Time()
			}
		}
		if firstDone.IsZero() || secondStarted.IsZero() || secondStarted.Before(firstDone) {
			return fmt.Errorf("rollout of %s: %s succeeded at %v, the wave of %s started at %v", rel, k.waves[0], firstDone, k.waves[1], secondStarted)
		}
	}
	return nil
}

// kubecdPrimariesRun reads each release's primary in each cluster: its
// image and the commit it runs.
func (s *scenario) kubecdPrimariesRun(ctx context.Context, clusters, list string) error {
	return s.kubecdPrimariesRunCommit(ctx, clusters, list, s.w.git.commits["that"])
}

// kubecdPrimariesRunCommit is kubecdPrimariesRun of the given commit.
func (s *scenario) kubecdPrimariesRunCommit(ctx context.Context, clusters, list, commit string) error {
	want := map[string]string{}
	for _, part := range strings.Split(list, ", ") {
		var rel, image string
		if _, err := fmt.Sscanf(strings.ReplaceAll(part, `"`, ""), "%s image %s", &rel, &image); err != nil {
			return fmt.Errorf("%q: %w", part, err)
		}
		want[rel] = image
	}
	for rel, image := range want { // the scenario's registry, wherever it listens
		want[rel] = strings.ReplaceAll(image, "{registry}", s.w.regHost)
	}
	revision := s.w.git.url + "@" + commit
	for _, cl := range strings.Split(clusters, ",") {
		c, err := clientsFor(cl)
		if err != nil {
			return err
		}
		for rel, image := range want {
			d, err := c.Kube.AppsV1().Deployments(s.w.kubecd.namespace).Get(ctx, rel+"-primary", metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("reading %s-primary in %s: %w", rel, cl, err)
			}
			if got := d.Spec.Template.Annotations[canary.AnnotationRevision]; got != revision {
				return fmt.Errorf("%s-primary in %s runs revision %q, want %q", rel, cl, got, revision)
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
				return fmt.Errorf("%s-primary in %s runs %s, want %s", rel, cl, got, image)
			}
		}
	}
	return nil
}

func (s *scenario) kubecdExtraObjects(ctx context.Context, clusters, deployment, image, configMap string) error {
	for _, cl := range strings.Split(clusters, ",") {
		c, err := clientsFor(cl)
		if err != nil {
			return err
		}
		d, err := c.Kube.AppsV1().Deployments(s.w.kubecd.namespace).Get(ctx, deployment, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading %s in %s: %w", deployment, cl, err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("%s in %s runs %s, want %s", deployment, cl, got, image)
		}
		if _, err := c.Kube.CoreV1().ConfigMaps(s.w.kubecd.namespace).Get(ctx, configMap, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("reading ConfigMap %s in %s: %w", configMap, cl, err)
		}
	}
	return nil
}

// kubecdPushValue changes a release's value in a release file (the
// "value" of its values entry "key") and pushes it.
func (s *scenario) kubecdPushValue(ctx context.Context, key, release, value, path string) error {
	file := filepath.Join(s.w.git.work, path)
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	in, done := false, false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "- name: "):
			in = strings.TrimSpace(l) == "- name: "+release
		case in && strings.TrimSpace(l) == "- key: "+key && i+1 < len(lines):
			lines[i+1] = lines[i+1][:strings.Index(lines[i+1], "value:")] + `value: "` + value + `"`
			done = true
		}
	}
	if !done {
		return fmt.Errorf("%s has no value %s of release %s", path, key, release)
	}
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	return s.commit(ctx, path, "set "+key+" of "+release)
}

// kubecdImageInRegistry moves an image of the repository's values into the
// scenario's registry (every "repository: <image>" line becomes
// "repository: <registry>/<image>") in the first commit, and makes it the
// image the scenario pushes.
func (s *scenario) kubecdImageInRegistry(ctx context.Context, image string) error {
	r := s.w.git
	changed := 0
	err := filepath.WalkDir(r.work, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			if d != nil && d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		line := "repository: " + image + "\n"
		if !strings.Contains(string(b), line) {
			return nil
		}
		changed++
		return os.WriteFile(p, []byte(strings.ReplaceAll(string(b), line, "repository: "+s.w.regHost+"/"+image+"\n")), 0o644)
	})
	if err != nil {
		return err
	}
	if changed == 0 {
		return fmt.Errorf("no values file names repository %s", image)
	}
	// Into the first commit: the first push rolls out every release.
	for _, args := range [][]string{{"add", "."}, {"commit", "--amend", "--no-edit"}, {"push", "--force", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	s.w.repo = image
	return nil
}

// kubecdPushTag pushes an image to the scenario's registry and delivers
// its notification, as the registry sends it.
func (s *scenario) kubecdPushTag(ctx context.Context, tag, image string) error {
	s.w.repo = image
	body, err := s.push(tag)
	if err != nil {
		return err
	}
	return s.notify(ctx, body)
}

// branchHead is the commit main points at in the bare repository.
func (s *scenario) branchHead(ctx context.Context) (string, error) {
	out, err := git(ctx, s.w.git.bare, "rev-parse", "refs/heads/main")
	return strings.TrimSpace(out), err
}

// kubecdTagSkipped waits for flotilla to skip the push for the release,
// saying why, and reads the repository: its branch did not move.
func (s *scenario) kubecdTagSkipped(ctx context.Context, tag, release, reason string) error {
	_, err := s.w.sink.waitFor(ctx, "tag "+tag+" skipped for "+release, func(e cloudevents.Event) bool {
		p, err := events.Decode[events.RolloutSkipped](e)
		return e.Type() == events.TypeRolloutSkipped && err == nil && p.Application == release && p.Tag == tag && strings.Contains(p.Reason, reason)
	})
	if err != nil {
		return err
	}
	head, err := s.branchHead(ctx)
	if err != nil {
		return err
	}
	if want := s.w.git.commits["that"]; head != want {
		return fmt.Errorf("main of the deployments repository is at %s, want %s (unmoved)", head, want)
	}
	return nil
}

// kubecdTriggerCommitted waits for main of the deployments repository to
// move, and reads the new commit: one commit on the previous head, by
// flotilla, whose only change is the release's value in the release file
// (the value line replaced in place, comments and layout kept). It
// becomes "that commit".
func (s *scenario) kubecdTriggerCommitted(ctx context.Context, key, release, value, path string) error {
	prev := s.w.git.commits["that"]
	var head string
	for {
		var err error
		if head, err = s.branchHead(ctx); err != nil {
			return err
		}
		if head != prev {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("main of the deployments repository stayed at %s: %w", prev, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	bare := s.w.git.bare
	meta, err := git(ctx, bare, "log", "-1", "--format=%P%n%an", head)
	if err != nil {
		return err
	}
	if got, want := strings.TrimSpace(meta), prev+"\nflotilla"; got != want {
		return fmt.Errorf("commit %s: parent and author %q, want %q", head, got, want)
	}
	files, err := git(ctx, bare, "diff", "--name-only", prev, head)
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(files); got != path {
		return fmt.Errorf("commit %s changed %q, want only %s", head, got, path)
	}
	before, err := git(ctx, bare, "show", prev+":"+path)
	if err != nil {
		return err
	}
	after, err := git(ctx, bare, "show", head+":"+path)
	if err != nil {
		return err
	}
	// The release's entry of key, its value line replaced.
	lines := strings.Split(before, "\n")
	in, done := false, false
	for i, l := range lines {
		switch t := strings.TrimSpace(l); {
		case strings.HasPrefix(t, "- name: "):
			in = t == "- name: "+release
		case in && t == "- key: "+key && i+1 < len(lines):
			v := lines[i+1]
			at := strings.Index(v, "value:")
			end := len(v)
			if c := strings.Index(v, "   #"); c > at {
				end = c
			}
			lines[i+1] = v[:at] + `value: "` + value + `"` + v[end:]
			done = true
		}
	}
	if !done {
		return fmt.Errorf("%s at %s has no value %s of release %s", path, prev, key, release)
	}
	if want := strings.Join(lines, "\n"); after != want {
		return fmt.Errorf("%s at %s:\n%s\nwant:\n%s", path, head, after, want)
	}
	s.w.git.commits["that"] = head
	return nil
}
