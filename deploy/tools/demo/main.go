// Command demo shows flotilla end to end on one machine (`make demo`):
//
//   - a local fleet of three real clusters (c1, c2, c3; kube-apiserver, kwok
//     and the fast Flagger build each) in /tmp/flotilla-demo-fleet,
//   - a real registry, Debian's docker-registry (CNCF distribution 2.8),
//     installed with apt-get when missing and configured to send its
//     notifications to flotilla,
//   - `flotilla serve` with waves [c1] then [c2, c3] and a blue/green canary
//     whose rollout gate is a small HTTP server in this program.
//
// It pushes podinfo 1.0.0 (rolled out everywhere first), then 1.1.0 (rolls
// out through both waves), then 1.2.0, whose gate fails in c3 so that the
// whole fleet is rolled back to 1.1.0. It draws each rollout live (waves x
// clusters, state, Flagger phase, canary weight, what each primary runs),
// ends with a summary, and exits non-zero when the expectations were not
// met. Everything binds 127.0.0.1 and is torn down on exit, on Ctrl-C and on
// error.
//
//	go run ./deploy/tools/demo [-fleet-dir DIR] [-keep-logs]
//
// Build the fleet's binaries first: make fleet-build (make demo does).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

const (
	app       = "podinfo"
	namespace = "demo"
	repo      = "demo/podinfo"
	// The gate fails for this cluster during the rollout of this version.
	failCluster = "c3"
	failVersion = "1.2.0"
)

var waves = [][]string{{"c1"}, {"c2", "c3"}}

func main() {
	fleetDir := flag.String("fleet-dir", filepath.Join(os.TempDir(), "flotilla-demo-fleet"),
		"directory of the demo's own fleet (not the test fleet's)")
	keep := flag.Bool("keep-logs", false, "keep the demo's work dir (configs, logs) even when it succeeds")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills the demo at once (the kernel then kills its children)
	}()
	d := &demo{scr: newScreen(os.Stdout), fleetDir: *fleetDir, keep: *keep,
		digests: map[string]string{}, versions: map[string]string{}}
	err := d.run(ctx)
	interrupted := err != nil && ctx.Err() != nil
	d.teardown(err != nil && !interrupted)
	switch {
	case interrupted:
		fmt.Fprintln(os.Stderr, "demo: interrupted; everything it started is stopped")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo: FAILED:", err)
		os.Exit(1)
	}
}

// demo is one run of the demo.
type demo struct {
	scr      *screen
	fleetDir string
	keep     bool

	dir          string // work dir: configs, logs, registry storage
	fleet        *localfleet.Fleet
	kube         map[string]kubernetes.Interface
	regAddr      string
	flotillaAddr string
	flotillaBin  string
	// apiToken is flotilla's API token: the demo's reads send it, and a
	// person logs in to the web UI with it (#31: every read needs one).
	apiToken string
	registry *proc.Proc
	flotilla *proc.Proc
	gate     *gate
	gateSrv  *http.Server
	gateURL  string

	mu       sync.Mutex
	digests  map[string]string // version -> digest
	versions map[string]string // digest -> version
	results  []result
}

// result is how one rollout ended.
type result struct {
	version, digest, id string
	phase               rollout.Phase
	reason              string
	duration            time.Duration // flotilla: rollout created -> ended
	notified            time.Duration // push done -> rollout visible in the API
	clusters            map[string]rollout.ClusterPhase
	primaries           map[string]string // cluster -> primary's image when the rollout ended
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (d *demo) run(ctx context.Context) error {
	d.scr.step("checking for docker-registry (Debian's CNCF distribution)")
	if err := ensureDockerRegistry(ctx, func(f string, a ...any) { d.scr.step(f, a...) }); err != nil {
		return err
	}
	var err error
	if d.dir, err = os.MkdirTemp("", "flotilla-demo-*"); err != nil {
		return err
	}

	// The slow parts together: the fleet (~20 s) and the flotilla binary.
	d.scr.step("starting the fleet: 3 clusters (etcd, kube-apiserver, kwok, fast Flagger) in %s; building flotilla", d.fleetDir)
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.startFleet(gctx) })
	g.Go(func() error { return d.buildFlotilla(gctx) })
	if err := g.Wait(); err != nil {
		return err
	}
	d.scr.step("fleet ready and flotilla built in %s", time.Since(t0).Round(100*time.Millisecond))
	// Ports for the registry and flotilla, picked once the fleet holds its own.
	if d.regAddr, err = proc.FreeAddr(ctx); err != nil {
		return err
	}
	if d.flotillaAddr, err = proc.FreeAddr(ctx); err != nil {
		return err
	}

	d.apiToken = randomHex(16)
	if err := d.startGate(ctx); err != nil {
		return err
	}
	registryToken, flaggerToken := randomHex(16), randomHex(16)
	if err := d.startFlotilla(ctx, registryToken, flaggerToken); err != nil {
		return err
	}
	d.scr.step("flotilla serving on http://%s (log %s)", d.flotillaAddr, filepath.Join(d.dir, "flotilla.log"))
	d.scr.step("web UI: http://%s/ui/ (log in with the API token %s; the CLI: FLOTILLA_TOKEN=%s flotilla get rollouts --watch --server http://%s)",
		d.flotillaAddr, d.apiToken, d.apiToken, d.flotillaAddr)
	if d.registry, err = startRegistry(ctx, d.dir, d.regAddr, "http://"+d.flotillaAddr+"/hooks/registry", registryToken); err != nil {
		return err
	}
	d.scr.step("docker-registry %s serving on http://%s, notifying flotilla's /hooks/registry with a bearer token",
		dockerRegistryVersion(ctx), d.regAddr)
	if err := d.createWorkloads(ctx); err != nil {
		return err
	}
	d.scr.step("namespace %q and Deployment %q created in c1, c2, c3", namespace, app)

	plan := []struct{ version, title string }{
		{"1.0.0", "1/3 podinfo 1.0.0 (initial version)"},
		{"1.1.0", "2/3 podinfo 1.1.0 (a good version)"},
		{"1.2.0", "3/3 podinfo 1.2.0 (its gate fails in c3)"},
	}
	for _, p := range plan {
		res, err := d.rollout(ctx, p.version, p.title)
		if err != nil {
			return err
		}
		d.results = append(d.results, res)
		if p.version == "1.0.0" && res.phase != rollout.Succeeded {
			return fmt.Errorf("the initial rollout of 1.0.0 ended %s: %s", res.phase, res.reason)
		}
	}
	failures := d.check(ctx)
	d.summary(ctx, failures)
	if len(failures) > 0 {
		return fmt.Errorf("%d expectation(s) not met", len(failures))
	}
	return nil
}

func (d *demo) startFleet(ctx context.Context) error {
	if old, err := localfleet.Load(d.fleetDir); err == nil && old.Running() {
		return fmt.Errorf("a fleet already runs in %s (another demo?); stop it with: go run ./deploy/tools/local down -dir %s",
			d.fleetDir, d.fleetDir)
	}
	f, err := localfleet.Up(ctx, localfleet.Options{
		Dir: d.fleetDir, Clusters: 3, Tekton: false, DieWithParent: true,
	})
	if err != nil {
		return fmt.Errorf("starting the fleet (logs in %s/*/logs): %w", d.fleetDir, err)
	}
	d.mu.Lock()
	d.fleet = f
	d.mu.Unlock()
	d.kube = map[string]kubernetes.Interface{}
	for _, c := range f.Clusters {
		cfg, err := c.RESTConfig()
		if err != nil {
			return err
		}
		if d.kube[c.Name], err = kubernetes.NewForConfig(cfg); err != nil {
			return err
		}
	}
	return nil
}

func (d *demo) buildFlotilla(ctx context.Context) error {
	d.flotillaBin = filepath.Join(d.dir, "flotilla")
	goBin := "go"
	if g := os.Getenv("GO"); g != "" {
		goBin = g
	}
	out, err := exec.CommandContext(ctx, goBin, "build", "-o", d.flotillaBin, "github.com/flotilla-cd/flotilla").CombinedOutput()
	if err != nil {
		return fmt.Errorf("building flotilla: %w\n%s", err, out)
	}
	return nil
}

// gate answers Flagger's rollout gate: 500 for failCluster during the
// rollout of failVersion, 200 otherwise. flotilla puts the cluster and the
// rollout id in every gate call's metadata; the gate asks flotilla's API
// which version a rollout id carries.
type gate struct {
	api   string
	token string // the API token its reads send
	mu    sync.Mutex
	tags  map[string]string // rollout id -> tag
	calls map[string]int    // "cluster tag status" -> count
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct {
		Name     string            `json:"name"`
		Phase    string            `json:"phase"`
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
		http.Error(w, "decoding the webhook: "+err.Error(), http.StatusBadRequest)
		return
	}
	cluster, id := p.Metadata["cluster"], p.Metadata["rollout"]
	tag, err := g.tag(r.Context(), id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	status := http.StatusOK
	if cluster == failCluster && tag == failVersion {
		status = http.StatusInternalServerError
	}
	g.mu.Lock()
	g.calls[fmt.Sprintf("%s %s %d", cluster, tag, status)]++
	g.mu.Unlock()
	if status != http.StatusOK {
		http.Error(w, fmt.Sprintf("gate closed: %s must not run %s", cluster, tag), status)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func (g *gate) tag(ctx context.Context, id string) (string, error) {
	g.mu.Lock()
	tag, ok := g.tags[id]
	g.mu.Unlock()
	if ok {
		return tag, nil
	}
	var r rollout.Rollout
	if err := getJSON(ctx, g.api+"/api/v1/rollouts/"+id, g.token, &r); err != nil {
		return "", fmt.Errorf("looking up rollout %q: %w", id, err)
	}
	g.mu.Lock()
	g.tags[id] = r.Tag
	g.mu.Unlock()
	return r.Tag, nil
}

func (d *demo) startGate(ctx context.Context) error {
	l, err := proc.Listen(ctx)
	if err != nil {
		return err
	}
	d.gate = &gate{api: "http://" + d.flotillaAddr, token: d.apiToken, tags: map[string]string{}, calls: map[string]int{}}
	d.gateSrv = &http.Server{Handler: d.gate, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = d.gateSrv.Serve(l) }()
	d.gateURL = "http://" + l.Addr().String() + "/gate"
	return nil
}

func (d *demo) startFlotilla(ctx context.Context, registryToken, flaggerToken string) error {
	secret := func(name, value string) (map[string]string, error) {
		p := filepath.Join(d.dir, name)
		return map[string]string{"file": p}, os.WriteFile(p, []byte(value+"\n"), 0o600)
	}
	regSecret, err := secret("registry.token", registryToken)
	if err != nil {
		return err
	}
	flSecret, err := secret("flagger.token", flaggerToken)
	if err != nil {
		return err
	}
	apiSecret, err := secret("api.token", d.apiToken)
	if err != nil {
		return err
	}
	var clusters []map[string]any
	var ws []map[string]any
	for i, names := range waves {
		ws = append(ws, map[string]any{"name": fmt.Sprintf("wave-%d", i+1), "clusters": names})
		for _, n := range names {
			c, ok := d.fleet.Cluster(n)
			if !ok {
				return fmt.Errorf("the fleet has no cluster %s", n)
			}
			clusters = append(clusters, map[string]any{"name": n, "kubeconfig": c.Kubeconfig})
		}
	}
	cfg := map[string]any{
		"server": map[string]any{"listen": d.flotillaAddr, "dataDir": filepath.Join(d.dir, "flotilla-data"), "apiToken": apiSecret},
		"receivers": []map[string]any{
			{"name": "registry", "type": "distribution", "secret": regSecret},
			{"name": "flagger", "type": "flagger", "secret": flSecret},
		},
		"fleet": map[string]any{"clusters": clusters, "waves": ws},
		"applications": []map[string]any{{
			"name": app, "image": d.regAddr + "/" + repo, "track": "MinorVersion", "namespace": namespace,
			"workload": map[string]any{"kind": "Deployment", "name": app, "container": app},
			"service":  map[string]any{"port": 9898},
			"delivery": map[string]any{
				"strategy": "blueGreen", "interval": "1s", "iterations": 2, "threshold": 1, "progressDeadline": "2m",
				"webhooks": []map[string]any{{"name": "gate", "type": "rollout", "url": d.gateURL, "timeout": "5s"}},
			},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(d.dir, "flotilla.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		return err
	}
	d.flotilla, err = proc.Start(ctx, "flotilla", filepath.Join(d.dir, "flotilla.log"),
		d.flotillaBin, "serve", "--config", cfgPath, "--log-level", "debug")
	if err != nil {
		return err
	}
	return d.flotilla.WaitHTTP(ctx, "http://"+d.flotillaAddr+"/readyz", 30*time.Second)
}

func (d *demo) createWorkloads(ctx context.Context) error {
	for _, names := range waves {
		for _, n := range names {
			cs := d.kube[n]
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
			if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace in %s: %w", n, err)
			}
			labels := map[string]string{"app": app}
			dep := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: app, Image: d.regAddr + "/" + repo + ":1.0.0",
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
						}}},
					},
				},
			}
			if _, err := cs.AppsV1().Deployments(namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating deployment in %s: %w", n, err)
			}
		}
	}
	return nil
}

// push writes a new random image as repo:version into the registry.
func (d *demo) push(ctx context.Context, version string) (string, error) {
	img, err := random.Image(2048, 2)
	if err != nil {
		return "", err
	}
	ref, err := name.NewTag(d.regAddr + "/" + repo + ":" + version)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	dg, err := img.Digest()
	if err != nil {
		return "", err
	}
	d.mu.Lock()
	d.digests[version], d.versions[dg.String()] = dg.String(), version
	d.mu.Unlock()
	return dg.String(), nil
}

// rollout pushes a version, waits for the registry's notification to start
// its rollout, and shows the rollout until it ends.
func (d *demo) rollout(ctx context.Context, version, title string) (result, error) {
	digest, err := d.push(ctx, version)
	if err != nil {
		return result{}, err
	}
	pushed := time.Now()
	d.scr.step("pushed %s:%s (%s); waiting for docker-registry's notification to reach flotilla", repo, version, short(digest))
	api := "http://" + d.flotillaAddr
	var id string
	err = poll(ctx, 50*time.Millisecond, 30*time.Second, func() (bool, error) {
		var ros []rollout.Rollout
		if err := getJSON(ctx, api+"/api/v1/rollouts", d.apiToken, &ros); err != nil {
			return false, nil
		}
		for _, r := range ros {
			if r.Application == app && r.Tag == version {
				id = r.ID
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return result{}, fmt.Errorf("no rollout of %s started within 30s of the push (registry log %s, flotilla log %s): %w",
			version, d.registry.Log, d.flotilla.Log, err)
	}
	notified := time.Since(pushed)
	d.scr.step("rollout %s of %s started %s after the push", id, version, notified.Round(time.Millisecond))

	var r rollout.Rollout
	primaries := map[string]string{}
	err = poll(ctx, 500*time.Millisecond, 4*time.Minute, func() (bool, error) {
		if err := getJSON(ctx, api+"/api/v1/rollouts/"+id, d.apiToken, &r); err != nil {
			return false, nil // flotilla may be busy; the deadline catches a dead one
		}
		primaries = d.primaries(ctx)
		d.scr.rollout(title, &r, time.Since(pushed), func(c string) string { return d.describe(primaries[c]) })
		return r.Phase.Done(), nil
	})
	d.scr.endRollout()
	if err != nil {
		return result{}, fmt.Errorf("rollout %s of %s did not end within 4m (last phase %s; flotilla log %s): %w",
			id, version, r.Phase, d.flotilla.Log, err)
	}
	res := result{version: version, digest: digest, id: id, phase: r.Phase, reason: r.Reason,
		duration: r.Updated.Sub(r.Created), notified: notified,
		clusters: map[string]rollout.ClusterPhase{}, primaries: primaries}
	for _, w := range r.Waves {
		for _, c := range w.Clusters {
			res.clusters[c.Name] = c.Phase
		}
	}
	d.scr.step("rollout of %s ended %s in %s", version, r.Phase, res.duration.Round(100*time.Millisecond))
	return res, nil
}

// primaries reads the image of every cluster's primary Deployment.
func (d *demo) primaries(ctx context.Context) map[string]string {
	out := map[string]string{}
	for n, cs := range d.kube {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		dep, err := cs.AppsV1().Deployments(namespace).Get(ctx, app+"-primary", metav1.GetOptions{})
		cancel()
		if err == nil && len(dep.Spec.Template.Spec.Containers) > 0 {
			out[n] = dep.Spec.Template.Spec.Containers[0].Image
		}
	}
	return out
}

func (d *demo) image(ctx context.Context, cluster, deployment string) (string, error) {
	dep, err := d.kube[cluster].AppsV1().Deployments(namespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading %s in %s: %w", deployment, cluster, err)
	}
	return dep.Spec.Template.Spec.Containers[0].Image, nil
}

// describe names an image by the version it carries: "1.1.0 (sha256:…)".
func (d *demo) describe(image string) string {
	if image == "" {
		return "-"
	}
	_, dg, ok := strings.Cut(image, "@")
	if !ok {
		return image[strings.LastIndex(image, "/")+1:]
	}
	d.mu.Lock()
	v, known := d.versions[dg]
	d.mu.Unlock()
	if !known {
		v = "?"
	}
	return fmt.Sprintf("%s (%s)", v, short(dg))
}

// check verifies the demo's expectations: 1.1.0 succeeded everywhere; 1.2.0
// failed in c3, was rolled back, and every primary runs 1.1.0's digest again
// while no workload runs 1.2.0's.
func (d *demo) check(ctx context.Context) []string {
	var failures []string
	byVersion := map[string]result{}
	for _, r := range d.results {
		byVersion[r.version] = r
	}
	good, bad := byVersion["1.1.0"], byVersion[failVersion]
	if good.phase != rollout.Succeeded {
		failures = append(failures, fmt.Sprintf("rollout of 1.1.0 ended %s, want Succeeded (%s)", good.phase, good.reason))
	}
	for c, p := range good.clusters {
		if p != rollout.ClusterSucceeded {
			failures = append(failures, fmt.Sprintf("1.1.0 in %s ended %s, want Succeeded", c, p))
		}
	}
	goodRef := d.regAddr + "/" + repo + "@" + good.digest
	for c, img := range good.primaries {
		if img != goodRef {
			failures = append(failures, fmt.Sprintf("after 1.1.0 the primary in %s runs %s, want %s", c, d.describe(img), d.describe(goodRef)))
		}
	}
	if bad.phase != rollout.RolledBack {
		failures = append(failures, fmt.Sprintf("rollout of %s ended %s, want RolledBack (%s)", failVersion, bad.phase, bad.reason))
	}
	// The failed cluster is reverted too, so the rollout's reason and the
	// gate's answers say where it failed.
	if !strings.Contains(bad.reason, "cluster "+failCluster+" failed") {
		failures = append(failures, fmt.Sprintf("rollout of %s failed for %q, want a failure of cluster %s", failVersion, bad.reason, failCluster))
	}
	d.gate.mu.Lock()
	for k, n := range d.gate.calls {
		f := strings.Fields(k)
		if f[2] != "200" && (f[0] != failCluster || f[1] != failVersion) {
			failures = append(failures, fmt.Sprintf("the gate answered %s to %s during %s (%d times)", f[2], f[0], f[1], n))
		}
	}
	if d.gate.calls[failCluster+" "+failVersion+" 500"] == 0 {
		failures = append(failures, fmt.Sprintf("the gate never failed %s during %s", failCluster, failVersion))
	}
	d.gate.mu.Unlock()
	// Every primary back on 1.1.0, no workload on 1.2.0. Rollback is done when
	// the rollout says RolledBack; a short grace covers Flagger finishing its
	// own bookkeeping.
	badRef := d.regAddr + "/" + repo + "@" + bad.digest
	var last []string
	_ = poll(ctx, 250*time.Millisecond, 30*time.Second, func() (bool, error) {
		last = nil
		for _, names := range waves {
			for _, c := range names {
				prim, err := d.image(ctx, c, app+"-primary")
				if err != nil {
					last = append(last, err.Error())
					continue
				}
				if prim != goodRef {
					last = append(last, fmt.Sprintf("after the rollback the primary in %s runs %s, want 1.1.0 (%s)", c, d.describe(prim), short(good.digest)))
				}
				canary, err := d.image(ctx, c, app)
				if err != nil {
					last = append(last, err.Error())
					continue
				}
				if canary == badRef {
					last = append(last, fmt.Sprintf("after the rollback the Deployment %s in %s still runs %s", app, c, failVersion))
				}
			}
		}
		return len(last) == 0, nil
	})
	return append(failures, last...)
}

func (d *demo) summary(ctx context.Context, failures []string) {
	var b strings.Builder
	b.WriteString("\nSUMMARY\n")
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	row := func(format string, args ...any) { _, _ = fmt.Fprintf(tw, format, args...) }
	row("VERSION\tDIGEST\tROLLOUT\tRESULT\tPUSH->STARTED\tDURATION")
	for _, names := range waves {
		for _, c := range names {
			row("\t%s PRIMARY", strings.ToUpper(c))
		}
	}
	row("\n")
	for _, r := range d.results {
		row("%s\t%s\t%s\t%s\t%s\t%s", r.version, short(r.digest), r.id, r.phase,
			r.notified.Round(time.Millisecond), r.duration.Round(100*time.Millisecond))
		for _, names := range waves {
			for _, c := range names {
				cell := d.describe(r.primaries[c])
				if p := r.clusters[c]; p != rollout.ClusterSucceeded {
					cell += " [" + string(p) + "]"
				}
				row("\t%s", cell)
			}
		}
		row("\n")
	}
	_ = tw.Flush()
	if bad := d.resultOf(failVersion); bad.reason != "" {
		fmt.Fprintf(&b, "\n%s rolled back because: %s\n", failVersion, bad.reason)
	}
	if acc, ign, unauth, err := d.registryDeliveries(ctx); err == nil {
		fmt.Fprintf(&b, "docker-registry %s delivered %d notifications to flotilla: %d tagged manifest pushes journaled, %d ignored (blob pushes, pulls), %d refused\n",
			dockerRegistryVersion(ctx), acc+ign+unauth, acc, ign, unauth)
	}
	d.gate.mu.Lock()
	var calls []string
	for k, n := range d.gate.calls {
		f := strings.Fields(k)
		calls = append(calls, fmt.Sprintf("%s@%s->%s x%d", f[0], f[1], f[2], n))
	}
	d.gate.mu.Unlock()
	slices.Sort(calls)
	fmt.Fprintf(&b, "rollout gate calls (cluster@version->status): %s\n", strings.Join(calls, ", "))
	fmt.Fprintf(&b, "total %s\n\n", time.Since(d.scr.start).Round(100*time.Millisecond))
	if len(failures) == 0 {
		b.WriteString("PASS  1.1.0 succeeded in c1, c2, c3; 1.2.0 failed its gate in c3 and every primary is back on 1.1.0\n")
	} else {
		for _, f := range failures {
			b.WriteString("FAIL  " + f + "\n")
		}
	}
	d.scr.mu.Lock()
	_, _ = io.WriteString(d.scr.out, b.String())
	d.scr.mu.Unlock()
}

func (d *demo) resultOf(version string) result {
	for _, r := range d.results {
		if r.version == version {
			return r
		}
	}
	return result{}
}

// registryDeliveries reads flotilla's webhook counters of the registry receiver.
func (d *demo) registryDeliveries(ctx context.Context) (accepted, ignored, unauth int, err error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.flotillaAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "flotilla_webhooks_total{") || !strings.Contains(line, `receiver="registry"`) {
			continue
		}
		f := strings.Fields(line)
		n, _ := strconv.ParseFloat(f[len(f)-1], 64)
		switch {
		case strings.Contains(line, `outcome="accepted"`), strings.Contains(line, `outcome="duplicate"`):
			accepted += int(n)
		case strings.Contains(line, `outcome="ignored"`):
			ignored += int(n)
		default:
			unauth += int(n)
		}
	}
	return accepted, ignored, unauth, nil
}

// teardown stops everything the demo started, newest first.
func (d *demo) teardown(failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if d.flotilla != nil {
		d.flotilla.Stop(10 * time.Second)
	}
	if d.registry != nil {
		d.registry.Stop(5 * time.Second)
	}
	if d.gateSrv != nil {
		_ = d.gateSrv.Close()
	}
	d.mu.Lock()
	f := d.fleet
	d.mu.Unlock()
	if f != nil {
		if err := f.Down(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "demo: stopping the fleet:", err)
		}
	}
	switch {
	case d.dir == "":
	case failed || d.keep:
		fmt.Fprintf(os.Stderr, "demo: configs and logs kept in %s (fleet logs in %s)\n", d.dir, d.fleetDir)
		if failed && d.flotilla != nil {
			fmt.Fprintf(os.Stderr, "--- flotilla log tail:\n%s\n", proc.Tail(d.flotilla.Log, 20))
		}
	default:
		_ = os.RemoveAll(d.dir)
	}
	fmt.Fprintln(os.Stderr, "demo: flotilla, docker-registry and the fleet are stopped")
}

// getJSON reads url of flotilla's API, sending token.
func getJSON(ctx context.Context, url, token string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// poll calls cond every interval until it is true, fails, or timeout passes.
func poll(ctx context.Context, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
