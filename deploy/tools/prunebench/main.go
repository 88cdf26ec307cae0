// Command prunebench measures what applying and pruning a git release of
// 200 objects costs in one real cluster, flotilla's way beside the
// reference, `kubectl apply --prune` (issue #33's measure):
//
//   - a local fleet of one cluster (a real kube-apiserver with its
//     controllers, Flagger's CRDs, no Flagger: nothing else writes the
//     objects meanwhile);
//   - a git repository (the git CLI) with one commit rendering 200 objects
//     (the workload, its Service, 150 ConfigMaps, 40 Secrets, 8
//     ServiceAccounts) and a second that drops 20 ConfigMaps, changes 10
//     and bumps the workload's image;
//   - flotilla: pipelines/tasks.ApplyManifests as the runner calls it (the
//     Flagger Canary of the workload with it, the inventory ConfigMap,
//     Flux's ssa package: dry run, apply of what changed, prune of what the
//     inventory says the commit dropped once the cluster succeeded);
//   - kubectl: `kubectl apply --prune -l ... --prune-allowlist` (client-side
//     apply: kubectl 1.34 refuses --prune with --server-side, "in alpha")
//     of the same objects in another namespace (a fresh one per round).
//
// It counts the API requests each sends (flotilla through a counting
// transport; kubectl from its -v=6 log, one line per response) and times
// each step, over -rounds rounds, and writes the medians.
//
//	go run ./deploy/tools/prunebench -rounds 3 -update BENCHMARKS.md
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

type options struct {
	rounds     int
	update     string
	keepDir    bool
	kubectlLog string
	timeout    time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.rounds, "rounds", 3, "rounds of the three steps for each tool (each in fresh namespaces); the medians are reported")
	flag.StringVar(&o.update, "update", "", "replace this section of the markdown file (BENCHMARKS.md) with the results; empty: print them")
	flag.BoolVar(&o.keepDir, "keep", false, "keep the fleet's and the repository's directory")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.StringVar(&o.kubectlLog, "kubectl-log", "", "write each kubectl run's -v=6 log into this directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Every step (the cluster's start, each apply, each kubectl run) ends
	// with the run's deadline: a round takes about 3 minutes here.
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		slog.Error("prunebench", "err", err)
		os.Exit(1)
	}
}

// Shape of the release.
const (
	configMaps      = 150
	secrets         = 40
	serviceAccounts = 8
	objects         = 2 + configMaps + secrets + serviceAccounts // the workload and its Service
	dropped         = 20                                         // ConfigMaps the second commit no longer renders
	changed         = 10                                         // ConfigMaps whose data it changes
	partOf          = "prunebench"
)

func run(ctx context.Context, o options) error {
	if o.rounds < 1 {
		return errors.New("-rounds must be at least 1")
	}
	dir, err := os.MkdirTemp("", "flotilla-prunebench-")
	if err != nil {
		return err
	}
	if !o.keepDir {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	start := time.Now()
	fleet, err := localfleet.Up(ctx, localfleet.Options{Dir: filepath.Join(dir, "fleet"), Clusters: 1, NoFlagger: true, DieWithParent: true, Logger: log})
	if err != nil {
		return fmt.Errorf("starting the cluster: %w", err)
	}
	defer func() {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = fleet.Down(c)
	}()
	log.Info("cluster ready", "took", time.Since(start).Round(time.Second))
	cl := fleet.Clusters[0]
	cfg, err := cl.RESTConfig()
	if err != nil {
		return err
	}
	if err := installFlaggerCRDs(ctx, cfg); err != nil {
		return err
	}
	repo := filepath.Join(dir, "repo")
	first, second, err := makeRepo(ctx, repo)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(localfleet.BinDir(), "kubectl-"+localfleet.KubeVersion)
	var fl, kc []round
	for i := range o.rounds {
		r, err := flotillaRound(ctx, cfg, repo, first, second, i)
		if err != nil {
			return fmt.Errorf("flotilla, round %d: %w", i+1, err)
		}
		log.Info("flotilla", "round", i+1, "steps", r)
		fl = append(fl, r)
		r, err = kubectlRound(ctx, cfg, kubectl, cl.Kubeconfig, repo, first, second, i, o.kubectlLog)
		if err != nil {
			return fmt.Errorf("kubectl, round %d: %w", i+1, err)
		}
		log.Info("kubectl", "round", i+1, "steps", r)
		kc = append(kc, r)
	}
	section := report(o, fl, kc)
	if o.update == "" {
		fmt.Print(section)
		return nil
	}
	return mdsection.Replace(o.update, heading, section, "## Reproduce")
}

const heading = "## Apply and prune of a release of 200 objects"

// step is one measured step: its wall time and the API requests it sent.
type step struct {
	took     time.Duration
	requests int64
	// inRequests is the time spent waiting for answers, summed over the
	// requests.
	inRequests time.Duration
}

func (s step) String() string {
	return fmt.Sprintf("%s/%d", s.took.Round(time.Millisecond), s.requests)
}

// round is one round's three steps: the first commit applied into a fresh
// namespace, the same commit again (nothing changed), and the second commit
// (with its prune).
type round struct{ create, unchanged, next step }

// installFlaggerCRDs applies Flagger's CRDs (the Canary flotilla applies
// with the release) and waits until they are served.
func installFlaggerCRDs(ctx context.Context, cfg *rest.Config) error {
	b, err := os.ReadFile(filepath.Join(localfleet.BinDir(), "flagger-"+localfleet.FlaggerVersion+"-crd.yaml"))
	if err != nil {
		return fmt.Errorf("reading Flagger's CRDs (make fleet-build): %w", err)
	}
	objs, err := kube.Decode(b)
	if err != nil {
		return err
	}
	a, err := kube.NewApplier(cfg, "prunebench")
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, objs...); err != nil {
		return fmt.Errorf("applying Flagger's CRDs: %w", err)
	}
	return kube.WaitCRDsEstablished(ctx, cfg, "canaries.flagger.app")
}

// makeRepo writes the release's two commits into a new repository at dir
// and returns their ids.
func makeRepo(ctx context.Context, dir string) (first, second string, err error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@localhost",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@localhost")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "release"), 0o755); err != nil {
		return "", "", err
	}
	if _, err := git("init", "-q", "-b", "main"); err != nil {
		return "", "", err
	}
	commit := func(version string, cms int, changedData string) (string, error) {
		if err := writeRelease(filepath.Join(dir, "release"), version, cms, changedData); err != nil {
			return "", err
		}
		if _, err := git("add", "-A"); err != nil {
			return "", err
		}
		if _, err := git("commit", "-q", "-m", "release "+version); err != nil {
			return "", err
		}
		return git("rev-parse", "HEAD")
	}
	if first, err = commit("1.0.0", configMaps, "one"); err != nil {
		return "", "", err
	}
	second, err = commit("1.1.0", configMaps-dropped, "two")
	return first, second, err
}

// writeRelease writes the release's files: the workload at version, its
// Service, cms ConfigMaps (the first `changed` of them holding data), the
// Secrets and ServiceAccounts; one file per kind.
func writeRelease(dir, version string, cms int, data string) error {
	files := map[string]*bytes.Buffer{}
	add := func(file, doc string) {
		if files[file] == nil {
			files[file] = &bytes.Buffer{}
		}
		fmt.Fprintf(files[file], "---\n%s", doc)
	}
	labels := fmt.Sprintf("  labels: {app.kubernetes.io/part-of: %s}\n", partOf)
	add("web.yaml", `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
`+labels+`spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - name: web
          image: registry.test/web:`+version+`
          ports: [{containerPort: 8080}]
`)
	add("web.yaml", `apiVersion: v1
kind: Service
metadata:
  name: web
`+labels+`spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`)
	for i := range cms {
		d := "same"
		if i < changed {
			d = data
		}
		add("configmaps.yaml", fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%03d\n%sdata: {key: %q}\n", i, labels, d))
	}
	for i := range secrets {
		add("secrets.yaml", fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: secret-%03d\n%sstringData: {password: %q}\n", i, labels, fmt.Sprint("p", i)))
	}
	for i := range serviceAccounts {
		add("serviceaccounts.yaml", fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: sa-%03d\n%s", i, labels))
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// counting counts the requests a client sends.
type counting struct {
	rt      http.RoundTripper
	n, nsec *atomic.Int64
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	t := time.Now()
	defer func() { c.nsec.Add(int64(time.Since(t))) }()
	return c.rt.RoundTrip(r)
}

// flotillaRound applies the first commit into a fresh namespace, again,
// then the second with its prune (left pending by the apply, deleted by the
// run flotilla requests once the cluster succeeded), as the runner does.
func flotillaRound(ctx context.Context, cfg *rest.Config, repo, first, second string, i int) (round, error) {
	var n, nsec atomic.Int64
	counted := rest.CopyConfig(cfg) // as the runner's: client-go's default client-side limits
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{rt: rt, n: &n, nsec: &nsec} })
	ns := fmt.Sprintf("flotilla-%d", i)
	if err := createNamespace(ctx, cfg, ns); err != nil {
		return round{}, err
	}
	mirrorDir := filepath.Join(os.TempDir(), fmt.Sprintf("prunebench-mirror-%d-%d", os.Getpid(), i))
	defer func() { _ = os.RemoveAll(mirrorDir) }()
	mirror := gitops.NewMirror(mirrorDir)
	params := func(commit, prune string) tasks.ApplyManifestsParams {
		return tasks.ApplyManifestsParams{
			Rollout: "bench-" + commit[:8], Namespace: ns, Workload: "web", Canary: canary(ns),
			URL: repo, Commit: commit, Paths: []string{"release"}, Application: "web", Prune: prune,
		}
	}
	r := gitops.Repo{URL: repo}
	// The mirror's first fetch is not the apply's: fetch before timing.
	warm := filepath.Join(os.TempDir(), fmt.Sprintf("prunebench-warm-%d", os.Getpid()))
	defer func() { _ = os.RemoveAll(warm) }()
	if err := mirror.Checkout(ctx, r, first, warm); err != nil {
		return round{}, err
	}
	apply := func(p ...tasks.ApplyManifestsParams) (step, error) {
		n.Store(0)
		nsec.Store(0)
		t := time.Now()
		for _, p := range p {
			if _, err := tasks.ApplyManifests(ctx, counted, mirror, r, p); err != nil {
				return step{}, err
			}
		}
		return step{took: time.Since(t), requests: n.Load(), inRequests: time.Duration(nsec.Load())}, nil
	}
	var out round
	var err error
	if out.create, err = apply(params(first, tasks.PruneAfter)); err != nil {
		return out, err
	}
	if out.unchanged, err = apply(params(first, tasks.PruneAfter)); err != nil {
		return out, err
	}
	if out.next, err = apply(params(second, tasks.PruneAfter), params(second, tasks.PrunePending)); err != nil {
		return out, err
	}
	return out, checkPruned(ctx, cfg, ns)
}

// kubectlRound does the same with `kubectl apply --prune` (client-side:
// kubectl refuses --prune with --server-side).
func kubectlRound(ctx context.Context, cfg *rest.Config, kubectl, kubeconfig, repo, first, second string, i int, logDir string) (round, error) {
	ns := fmt.Sprintf("kubectl-%d", i)
	if err := createNamespace(ctx, cfg, ns); err != nil {
		return round{}, err
	}
	tree := filepath.Join(os.TempDir(), fmt.Sprintf("prunebench-kubectl-%d", os.Getpid()))
	defer func() { _ = os.RemoveAll(tree) }()
	apply := func(name, commit string) (step, error) {
		_ = os.RemoveAll(tree)
		if out, err := exec.CommandContext(ctx, "git", "-c", "advice.detachedHead=false", "clone", "-q", repo, tree).CombinedOutput(); err != nil {
			return step{}, fmt.Errorf("git clone: %w: %s", err, out)
		}
		if out, err := exec.CommandContext(ctx, "git", "-C", tree, "checkout", "-q", commit).CombinedOutput(); err != nil {
			return step{}, fmt.Errorf("git checkout: %w: %s", err, out)
		}
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kubeconfig, "-n", ns, "-v=6",
			"apply", "-f", filepath.Join(tree, "release"),
			"--prune", "-l", "app.kubernetes.io/part-of="+partOf,
			"--prune-allowlist", "core/v1/ConfigMap", "--prune-allowlist", "core/v1/Secret",
			"--prune-allowlist", "core/v1/ServiceAccount", "--prune-allowlist", "core/v1/Service",
			"--prune-allowlist", "apps/v1/Deployment")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t := time.Now()
		if out, err := cmd.Output(); err != nil {
			return step{}, fmt.Errorf("kubectl apply: %w: %s%s", err, out, tail(stderr.String()))
		}
		if logDir != "" {
			if err := os.WriteFile(filepath.Join(logDir, fmt.Sprintf("kubectl-%d-%s.log", i+1, name)), stderr.Bytes(), 0o644); err != nil {
				return step{}, err
			}
		}
		n, in := responses(stderr.String())
		return step{took: time.Since(t), requests: n, inRequests: in}, nil
	}
	var out round
	var err error
	if out.create, err = apply("create", first); err != nil {
		return out, err
	}
	if out.unchanged, err = apply("unchanged", first); err != nil {
		return out, err
	}
	if out.next, err = apply("next", second); err != nil {
		return out, err
	}
	return out, checkPruned(ctx, cfg, ns)
}

// responses counts the responses in kubectl's -v=6 log, one line per
// request (`... "Response" verb="GET" url=... milliseconds=3`, client-go's
// round trippers), and sums their times.
func responses(log string) (int64, time.Duration) {
	var (
		n  int64
		in time.Duration
	)
	for l := range strings.Lines(log) {
		if !strings.Contains(l, `"Response" verb=`) {
			continue
		}
		n++
		if _, ms, ok := strings.Cut(l, "milliseconds="); ok {
			if v, err := strconv.Atoi(strings.TrimSpace(ms)); err == nil {
				in += time.Duration(v) * time.Millisecond
			}
		}
	}
	return n, in
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func canary(ns string) *flaggerv1.Canary {
	return &flaggerv1.Canary{
		TypeMeta:   metav1.TypeMeta{APIVersion: "flagger.app/v1beta1", Kind: "Canary"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: flaggerv1.CanarySpec{
			TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Service:   flaggerv1.CanaryService{Port: 80},
			Analysis:  &flaggerv1.CanaryAnalysis{Interval: "1m", Threshold: 5, Iterations: 10},
		},
	}
}

func createNamespace(ctx context.Context, cfg *rest.Config, name string) error {
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// checkPruned checks the namespace holds what the second commit renders:
// its ConfigMaps (and no dropped one), changed data, the bumped image.
func checkPruned(ctx context.Context, cfg *rest.Config, ns string) error {
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cms, err := k.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=" + partOf})
	if err != nil {
		return err
	}
	if got, want := len(cms.Items), configMaps-dropped; got != want {
		return fmt.Errorf("%s holds %d of the release's ConfigMaps after the prune, want %d", ns, got, want)
	}
	for _, c := range cms.Items {
		if c.Name == "cm-000" && c.Data["key"] != "two" {
			return fmt.Errorf("%s: cm-000 holds %q, want the second commit's data", ns, c.Data["key"])
		}
	}
	d, err := k.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.test/web:1.1.0" {
		return fmt.Errorf("%s: web runs %s, want 1.1.0", ns, img)
	}
	return nil
}

func median(rs []round, f func(round) step) step {
	ss := make([]step, 0, len(rs))
	for _, r := range rs {
		ss = append(ss, f(r))
	}
	slices.SortFunc(ss, func(a, b step) int { return int(a.took - b.took) })
	m := ss[len(ss)/2]
	reqs := make([]int64, 0, len(ss))
	in := make([]time.Duration, 0, len(ss))
	for _, s := range ss {
		reqs = append(reqs, s.requests)
		in = append(in, s.inRequests)
	}
	slices.Sort(reqs)
	slices.Sort(in)
	m.requests, m.inRequests = reqs[len(reqs)/2], in[len(in)/2]
	return m
}

func report(o options, fl, kc []round) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", heading)
	fmt.Fprintf(&b, "`go run ./deploy/tools/prunebench -rounds %d` (`make bench-prune`, in `make bench`), %s: a git release of %d objects (a Deployment, its Service, %d ConfigMaps, %d Secrets, %d ServiceAccounts) applied into a fresh namespace of one real cluster (kube-apiserver %s with its controllers, Flagger's CRDs, no Flagger), the same commit applied again, then a commit that drops %d ConfigMaps, changes %d and bumps the Deployment's image, with its prune. flotilla: `pipelines/tasks.ApplyManifests` as its runner calls it (the workload's Flagger Canary with the release, the inventory ConfigMap, Flux's `ssa`: a dry run, the apply of what changed, the prune the inventory leaves pending until the cluster succeeded, here run at once); kubectl: `kubectl apply --prune -l ... --prune-allowlist ...` of the same files in another namespace (client-side apply: kubectl %s refuses `--prune` with `--server-side` as alpha). Requests are counted on the client (flotilla through a counting transport, kubectl from its `-v=6` log); \"in requests\" sums the time each waited for its answer. Both run with client-go's default client-side rate limits. Medians of %d rounds.\n\n",
		o.rounds, time.Now().UTC().Format("2006-01-02"), objects, configMaps, secrets, serviceAccounts, localfleet.KubeVersion, dropped, changed, localfleet.KubeVersion, o.rounds)
	b.WriteString("| step | flotilla time | requests | in requests | kubectl time | requests | in requests |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, row := range []struct {
		name string
		f    func(round) step
	}{
		{fmt.Sprintf("first commit: %d objects created", objects), func(r round) step { return r.create }},
		{"the same commit again: nothing changed", func(r round) step { return r.unchanged }},
		{fmt.Sprintf("next commit: %d changed, %d pruned", changed+1, dropped), func(r round) step { return r.next }},
	} {
		f, k := median(fl, row.f), median(kc, row.f)
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d | %s |\n", row.name, f.took.Round(time.Millisecond), f.requests, f.inRequests.Round(time.Millisecond),
			k.took.Round(time.Millisecond), k.requests, k.inRequests.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "\nMachine: %d CPUs, %s/%s, %s; load average at the end: %s. kubectl's time includes its process start and discovery (cached in ~/.kube/cache after its first run); the rest of it beyond its requests is its own work between them (client-side apply reads each object, then computes a three-way merge patch from the OpenAPI schema: about 170 ms of CPU per object here, at nice 5 on a loaded machine). flotilla's time includes rendering the commit from its mirror; it makes more requests (Flux's ssa dry-runs each object to find what changed, and flotilla applies the Canary and its inventory besides) but waits on them, not on its own CPU.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), loadavg())
	return b.String()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
