package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

const (
	workload  = "podinfo"
	container = "podinfo"
	// firstVersion is every repository's first tag, which the Deployments
	// are created with.
	firstVersion = 0
)

// tag is the version pushed as the n-th minor: 1.n.0, semver that Keel's
// policy all and flotilla's MinorVersion track both take as newer.
func tag(n int) string { return fmt.Sprintf("1.%d.0", n) }

// subject is one tool in one configuration, with its own namespace (the
// same in every cluster) and its own repository: no tool sees another's
// pushes or workloads.
type subject struct {
	name string
	tool string // "flotilla", "keel", "flux" or "kargo": the processes it is measured with
	ns   string
	repo string
	reg  *registry
	// poll: the registry notifies nobody; the tool finds pushes by polling.
	poll bool
	// next is the minor of the next push.
	next int
	// good is the latest tag every cluster's primary ran.
	good    string
	digests map[string]string // tag -> digest
}

func (s *subject) image(t string) string { return s.reg.host + "/" + s.repo + ":" + t }

// bench owns everything one run starts.
type bench struct {
	o       options
	log     *slog.Logger
	dir     string
	fleet   *localfleet.Fleet
	names   []string // c1..cN
	kube    map[string]kubernetes.Interface
	flagger map[string]flaggerclient.Interface
	loud    *registry // notifies every tool
	// endpoints are the loud registry's notification endpoints.
	endpoints []endpoint
	// check is the analysis check of every tool's Canary.
	check  *checker
	silent *registry // notifies nobody: the pollers' registry
	keels  []*proc.Proc
	flux   []*fluxSet // one per cluster
	git    *gitServer // the Flux and Kargo subjects' deployments repository
	kargo  *kargoSet  // Kargo's control plane, on c1
	// fluxToken is every Flux Receiver's secret token.
	fluxToken string
	flot      map[string]*flotilla // by subject namespace
	track     *tracker
	meter     *meter
	subs      []*subject
	started   time.Time
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newBench(ctx context.Context, o options, log *slog.Logger) (*bench, error) {
	dir, err := os.MkdirTemp("", "flotilla-peerbench-*")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, log: log, dir: dir, kube: map[string]kubernetes.Interface{}, flagger: map[string]flaggerclient.Interface{},
		flot: map[string]*flotilla{}, started: time.Now()}
	flotBin := o.flotilla
	if flotBin == "" {
		flotBin = filepath.Join(dir, "flotilla")
		log.Info("building flotilla from this tree")
		out, err := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", flotBin, "github.com/flotilla-cd/flotilla").CombinedOutput()
		if err != nil {
			return b, fmt.Errorf("building flotilla: %w\n%s", err, out)
		}
	}
	log.Info("starting the local fleet", "clusters", o.clusters, "dir", dir)
	t := time.Now()
	b.fleet, err = localfleet.Up(ctx, localfleet.Options{
		Dir: filepath.Join(dir, "fleet"), Clusters: o.clusters, DieWithParent: true, Logger: log,
	})
	if err != nil {
		return b, fmt.Errorf("starting the fleet (make fleet-build): %w", err)
	}
	log.Info("fleet ready", "took", time.Since(t).Round(time.Second))
	for _, c := range b.fleet.Clusters {
		cfg, err := c.RESTConfig()
		if err != nil {
			return b, err
		}
		if b.kube[c.Name], err = kubernetes.NewForConfig(cfg); err != nil {
			return b, err
		}
		if b.flagger[c.Name], err = flaggerclient.NewForConfig(cfg); err != nil {
			return b, err
		}
		b.names = append(b.names, c.Name)
		if err := labelArch(ctx, b.kube[c.Name]); err != nil {
			return b, fmt.Errorf("labelling %s's node: %w", c.Name, err)
		}
	}

	// Addresses first: the registry's configuration names every receiver.
	if b.loud, err = newRegistry(ctx, filepath.Join(dir, "registry")); err != nil {
		return b, err
	}
	if b.silent, err = newRegistry(ctx, filepath.Join(dir, "registry-silent")); err != nil {
		return b, err
	}
	b.subs = []*subject{
		{name: "flotilla, waves [c1] [c2..]", tool: "flotilla", ns: "flotilla-waves"},
		{name: "flotilla, one wave", tool: "flotilla", ns: "flotilla-onewave"},
		{name: "Keel " + KeelVersion + ", registry webhook", tool: "keel", ns: "keel-webhook"},
	}
	if o.flux {
		b.subs = append(b.subs, &subject{name: "Flux, registry webhook (Receiver)", tool: "flux", ns: "flux-webhook"})
	}
	if o.kargo {
		b.subs = append(b.subs, &subject{name: "Kargo " + KargoVersion + ", registry webhook (generic receiver)", tool: "kargo", ns: "kargo-webhook"})
	}
	if o.pollPushes > 0 {
		b.subs = append(b.subs, &subject{name: "Keel " + KeelVersion + ", polling (default @every 1m)", tool: "keel", ns: "keel-poll", poll: true})
		if o.flux {
			b.subs = append(b.subs, &subject{name: "Flux, polling (ImageRepository every " + fluxImageInterval.String() + ")", tool: "flux", ns: "flux-poll", poll: true})
		}
		if o.kargo {
			b.subs = append(b.subs, &subject{name: "Kargo " + KargoVersion + ", polling (Warehouse every " + kargoWarehouseInterval.String() + ", its default)", tool: "kargo", ns: "kargo-poll", poll: true})
		}
	}
	for _, s := range b.subs {
		s.repo, s.reg, s.next, s.digests = "peers/"+s.ns, b.loud, firstVersion, map[string]string{}
		if s.poll {
			s.reg = b.silent
		}
	}

	b.check, err = newChecker(ctx, b.names[1:], func(cluster, ns string) string {
		if b.track == nil {
			return ""
		}
		return b.track.current(cluster, ns, workload)
	})
	if err != nil {
		return b, err
	}
	var endpoints []endpoint
	for _, s := range b.subs[:2] {
		waves := [][]string{b.names[:1], b.names[1:]}
		if s.ns == "flotilla-onewave" {
			waves = [][]string{b.names}
		}
		f, err := newFlotilla(ctx, filepath.Join(dir, s.ns), flotBin, b.loud.host+"/"+s.repo, s.ns, b.check.url, b.fleet, waves)
		if err != nil {
			return b, err
		}
		b.flot[s.ns] = f
		endpoints = append(endpoints, endpoint{name: s.ns, url: "http://" + f.addr + "/hooks/registry",
			headers: map[string][]string{"Authorization": {"Bearer " + f.registryToken}}})
	}
	for _, n := range b.names {
		c, _ := b.fleet.Cluster(n)
		k, addr, err := startKeel(ctx, filepath.Join(dir, "keel-"+n), o.keelBin, c.Kubeconfig)
		if err != nil {
			return b, err
		}
		b.keels = append(b.keels, k)
		endpoints = append(endpoints, endpoint{name: "keel-" + n, url: "http://" + addr + "/v1/webhooks/registry"})
	}
	if o.flux {
		eps, err := b.serveFlux(ctx)
		if err != nil {
			return b, err
		}
		endpoints = append(endpoints, eps...)
	}
	if o.kargo {
		c, _ := b.fleet.Cluster(b.names[0])
		cfg, err := c.RESTConfig()
		if err != nil {
			return b, err
		}
		b.kargo, err = startKargo(ctx, filepath.Join(dir, "kargo"), o.peersDir, c.Kubeconfig, cfg)
		if err != nil {
			return b, fmt.Errorf("starting Kargo on %s: %w", b.names[0], err)
		}
		if b.kargoWebhook() {
			endpoints = append(endpoints, endpoint{name: "kargo", url: "http://" + b.kargo.external + kargoReceiverPath(kargoProject, kargoReceiver, b.kargo.secret)})
		}
	}
	b.endpoints = endpoints
	if err := b.loud.start(ctx, endpoints); err != nil {
		return b, err
	}
	if err := b.silent.start(ctx, nil); err != nil {
		return b, err
	}
	for _, f := range b.flot {
		if err := f.start(ctx); err != nil {
			return b, err
		}
	}
	log.Info("registries, flotilla and the peers serving", "registry", b.loud.host, "silent_registry", b.silent.host, "dir", dir)
	return b, nil
}

// labelArch gives the fleet's fake node the kubernetes.io/arch label a
// kubelet sets on every real node: Keel's polling checks that a candidate
// image's platform runs on the workload's nodes, and skips it when a node's
// platform is unknown.
func labelArch(ctx context.Context, cs kubernetes.Interface) error {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if n.Labels[corev1.LabelArchStable] != "" {
			continue
		}
		p := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, corev1.LabelArchStable, runtime.GOARCH)
		if _, err := cs.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// serveFlux serves the deployments repository and starts Flux in every
// cluster (its CRDs first), and returns the registry's notification
// endpoints for the webhook subject's Receivers, one per cluster. The git
// server's push webhook goes to every cluster's `git` Receiver of every
// Flux and Kargo subject (Flux applies what Kargo pushes).
func (b *bench) serveFlux(ctx context.Context) ([]endpoint, error) {
	var err error
	b.fluxToken = randomHex(16)
	b.git, err = newGitServer(ctx, filepath.Join(b.dir, "git"), fluxRepoFiles(b.subs, b.names), func(msg string, args ...any) { b.log.Warn(msg, args...) })
	if err != nil {
		return nil, err
	}
	var eps []endpoint
	for _, n := range b.names {
		c, _ := b.fleet.Cluster(n)
		cfg, err := c.RESTConfig()
		if err != nil {
			return nil, err
		}
		if err := installFluxCRDs(ctx, cfg, b.o.fluxDir); err != nil {
			return nil, fmt.Errorf("installing Flux's CRDs in %s: %w", n, err)
		}
		fs, err := startFlux(ctx, filepath.Join(b.dir, "flux-"+n), b.o.fluxDir, n, c.Kubeconfig)
		if fs != nil {
			b.flux = append(b.flux, fs)
		}
		if err != nil {
			return nil, err
		}
		for _, s := range b.subs {
			if !appliedByFlux(s) {
				continue
			}
			b.git.onPush("http://" + fs.receiver + receiverPath(b.fluxToken, fluxGitReceiver, s.ns))
			if s.tool == "flux" && !s.poll {
				eps = append(eps, endpoint{name: "flux-" + n, url: "http://" + fs.receiver + receiverPath(b.fluxToken, fluxRegistryReceiver, s.ns)})
			}
		}
	}
	return eps, nil
}

func (b *bench) close(failed bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if b.track != nil {
		b.track.stop()
	}
	for _, f := range b.flot {
		f.stop()
	}
	for _, k := range b.keels {
		k.Stop(10 * time.Second)
	}
	if b.kargo != nil {
		b.kargo.stop()
	}
	for _, f := range b.flux {
		f.stop()
	}
	b.git.stop()
	b.check.stop()
	for _, r := range []*registry{b.loud, b.silent} {
		if r != nil {
			r.stop()
		}
	}
	if b.fleet != nil {
		if err := b.fleet.Down(ctx); err != nil {
			b.log.Warn("stopping the fleet", "error", err)
		}
	}
	if failed || b.o.keep {
		b.log.Info("work directory kept (configs, logs)", "dir", b.dir)
		return
	}
	_ = os.RemoveAll(b.dir)
}

// createWorkloads creates each subject's namespace and Deployment in every
// cluster, at the first version: Keel's carry its policy label (and its
// poll trigger for the polling subject), as its docs show. Flux's and
// Kargo's Deployments are not created here: Flux applies them from the
// deployments repository (applyFluxObjects).
func (b *bench) createWorkloads(ctx context.Context) error {
	for _, s := range b.subs {
		for _, n := range b.names {
			cs := b.kube[n]
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}
			if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s in %s: %w", s.ns, n, err)
			}
			if appliedByFlux(s) {
				continue
			}
			sel := map[string]string{"app": workload}
			labels := map[string]string{"app": workload}
			if s.tool == "keel" {
				labels["keel.sh/policy"] = "all"
				if s.poll {
					labels["keel.sh/trigger"] = "poll"
				}
			}
			dep := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: workload, Namespace: s.ns, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: sel},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: sel},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: container, Image: s.image(tag(firstVersion)),
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
						}}},
					},
				},
			}
			if _, err := cs.AppsV1().Deployments(s.ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating the Deployment in %s/%s: %w", n, s.ns, err)
			}
		}
	}
	return nil
}

// copyCanaries gives every peer's namespace of every cluster the Canary
// flotilla rendered for its application in that cluster, without
// flotilla's webhooks but with the bench's analysis check (and its
// cluster): the same analysis behind every tool.
func (b *bench) copyCanaries(ctx context.Context, from string) error {
	for _, n := range b.names {
		src, err := b.flagger[n].FlaggerV1beta1().Canaries(from).Get(ctx, workload, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading flotilla's Canary in %s/%s: %w", n, from, err)
		}
		for _, s := range b.subs {
			if s.tool == "flotilla" {
				continue
			}
			c := &flaggerv1.Canary{
				ObjectMeta: metav1.ObjectMeta{Name: workload, Namespace: s.ns},
				Spec:       *src.Spec.DeepCopy(),
			}
			if c.Spec.Analysis != nil {
				c.Spec.Analysis.Webhooks = checkHooks(c.Spec.Analysis.Webhooks, n)
			}
			if _, err := b.flagger[n].FlaggerV1beta1().Canaries(s.ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating the Canary in %s/%s: %w", n, s.ns, err)
			}
		}
	}
	return nil
}

// checkHooks keeps the bench's analysis check of a Canary's webhooks,
// with the cluster alone as its metadata.
func checkHooks(hooks []flaggerv1.CanaryWebhook, cluster string) []flaggerv1.CanaryWebhook {
	var out []flaggerv1.CanaryWebhook
	for _, h := range hooks {
		if h.Name == checkHook {
			h.Metadata = &map[string]string{"cluster": cluster}
			out = append(out, h)
		}
	}
	return out
}

// errTimeout: a push did not reach every cluster in time.
var errTimeout = errors.New("timed out")

// describe says where each cluster's workload and primary are, for errors.
func (b *bench) describe(s *subject) string {
	var parts []string
	for _, n := range b.names {
		parts = append(parts, fmt.Sprintf("%s: %s / primary %s", n,
			shortImage(b.track.current(n, s.ns, workload)), shortImage(b.track.current(n, s.ns, workload+"-primary"))))
	}
	return strings.Join(parts, "; ")
}

func shortImage(img string) string {
	if img == "" {
		return "-"
	}
	if i := strings.LastIndex(img, "/"); i >= 0 {
		img = img[i+1:]
	}
	if len(img) > 40 {
		img = img[:40] + "…"
	}
	return img
}
