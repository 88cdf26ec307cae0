package features

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"helm.sh/helm/v3/pkg/action"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/testkit/charttest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// The chart's features run flotilla as platform teams do: its image, built
// by the same tool as `make image` and pushed by digest, installed by the
// Helm SDK from deploy/chart/flotilla onto a real node (a kubelet on
// containerd and runc) of one of the fleet's clusters. The pod has a network
// of its own, on the node's bridge, as by the chart's defaults; the fleet's
// API servers and the scenario's servers, which listen on the host's
// loopback, it reaches at the node's address (the real node's
// HostLoopback), by which the scenario names them. Its Service, probes,
// Secrets and volume are real, and every webhook and API call of the
// scenario goes through the Service's cluster IP (kube-proxy).

const (
	// chartServiceIPs are the Services' fixed cluster IPs, in the lower
	// ("static") band of the fleet's 10.96.0.0/16, which the API server
	// leaves to fixed addresses: the config names it before it exists.
	chartServiceIPs = "10.96.0.%d"
	chartPath       = "../deploy/chart/flotilla"
)

// chartMu is held by the scenario whose flotilla the chart installed, from
// the install to its cleanup: the real node's name, its kube-proxy and the
// Service's fixed address are one per host.
var chartMu sync.Mutex

// chartInstalls counts the installs, to pick each one's Service address.
var chartInstalls atomic.Int32

// deployed is a flotilla the chart installed.
type deployed struct {
	charttest.Release
	cluster string
	image   string
	port    int
	// values are the release's values as installed, for upgrades.
	values map[string]any
	// acked are the versions whose push flotilla acknowledged (202) during
	// an upgrade, of sent; firstRefused how many of them only on a retry;
	// oldPod the pod the upgrade replaced.
	acked        []string
	sent         int
	firstRefused int
	oldPod       string
	// apiToken is the API token the chart generated, as first read from
	// its Secret.
	apiToken string
}

func (s *scenario) registerChartSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a real node in cluster "([^"]*)", its pods on a network of their own$`, s.aRealNode)
	sc.Step(`^flotilla is installed by its Helm chart from its image on the real node$`, s.installChart)
	sc.Step(`^flotilla is installed by its kustomize base from its image on the real node$`, s.installKustomize)
	sc.Step(`^flotilla's pod is Ready on the real node's pod network, from the image by digest, as user 65532 on a read-only root filesystem$`, s.chartPodReady)
	sc.Step(`^the chart is upgraded with a changed config while (\d+) versions are pushed, one every (\d+)ms$`, s.upgradeDuringPushes)
	sc.Step(`^a new pod replaced the old one, and every push flotilla acknowledged reached the event sink$`, s.acknowledgedDelivered)
	sc.Step(`^the chart is installed with its default values in cluster "([^"]*)"$`, s.installDefaults)
	sc.Step(`^helm install refused it naming "([^"]*)" and "([^"]*)", and the namespace holds nothing$`, s.defaultsRefused)
	sc.Step(`^the API token the chart generated, read from its Secret as its NOTES say, reads flotilla's API as "([^"]*)"; without a token flotilla answers 401$`, s.chartTokenReads)
	sc.Step(`^the API token the chart generated is the one before the upgrade, and still reads flotilla's API as "([^"]*)"$`, s.chartTokenKept)
}

// chartAPIToken reads the token the chart generated from its Secret, as
// the chart's NOTES tell a user to.
func (s *scenario) chartAPIToken(ctx context.Context) (string, error) {
	d := s.w.deployed
	if d == nil {
		return "", errors.New("flotilla is not installed by its chart")
	}
	sec, err := d.Kube.CoreV1().Secrets(d.Namespace).Get(ctx, charttest.ReleaseName+"-api-token", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the chart's API token: %w", err)
	}
	tok := string(sec.Data["token"])
	if len(tok) != 40 {
		return "", fmt.Errorf("the chart's API token %q: want 40 characters", tok)
	}
	return tok, nil
}

// chartTokenReads reads the API with the chart's token (its name as who
// asks) and without any (401).
func (s *scenario) chartTokenReads(ctx context.Context, name string) error {
	tok, err := s.chartAPIToken(ctx)
	if err != nil {
		return err
	}
	s.w.deployed.apiToken = tok
	if err := s.readsAs(ctx, tok, name); err != nil {
		return err
	}
	a, err := s.callBusy(ctx, http.MethodGet, "/api/v1/rollouts", nil, nil)
	if err != nil {
		return err
	}
	if a.status != http.StatusUnauthorized {
		return fmt.Errorf("GET /api/v1/rollouts without a token answered %d, want 401: %.200s", a.status, a.body)
	}
	return nil
}

// readsAs reads the rollouts and whoami with tok: 200, and name.
func (s *scenario) readsAs(ctx context.Context, tok, name string) error {
	a, err := s.callBusy(ctx, http.MethodGet, "/api/v1/rollouts", bearer(tok), nil)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("GET /api/v1/rollouts with the chart's token answered %d: %.200s", a.status, a.body)
	}
	a, err = s.callBusy(ctx, http.MethodGet, "/api/v1/whoami", bearer(tok), nil)
	if err != nil {
		return err
	}
	if !strings.Contains(a.body, fmt.Sprintf(`"name":%q`, name)) {
		return fmt.Errorf("GET /api/v1/whoami with the chart's token answered %d %s, want %s", a.status, a.body, name)
	}
	return nil
}

func (s *scenario) chartTokenKept(ctx context.Context, name string) error {
	tok, err := s.chartAPIToken(ctx)
	if err != nil {
		return err
	}
	if before := s.w.deployed.apiToken; tok != before {
		return fmt.Errorf("the chart's API token changed with the upgrade: %q, before %q", tok, before)
	}
	return s.readsAs(ctx, tok, name)
}

// installChart starts a real node in the cluster, builds and pushes the
// image there, and installs the chart with the scenario's config (written
// by an earlier "flotilla is configured" step), its secrets and the fleet's
// kubeconfigs in Secrets, and its journal on a PersistentVolume of the
// node. From then on the scenario's flotilla is the Service.
func (s *scenario) installChart(ctx context.Context) error {
	in, err := s.prepareInstall(ctx)
	if err != nil {
		return err
	}
	d := in.d
	repo, digest, _ := strings.Cut(d.image, "@")
	values := map[string]any{
		"image":       map[string]any{"repository": repo, "digest": digest},
		"config":      in.cfg,
		"secrets":     in.secrets,
		"kubeconfigs": map[string]any{"existingSecret": charttest.KubeconfigsSecret},
		"logLevel":    "debug",
		"service":     map[string]any{"port": d.port, "clusterIP": in.serviceIP},
		"persistence": map[string]any{"storageClass": "", "size": "64Mi", "keepOnUninstall": false},
	}
	maps.Copy(values, charttest.NodeValues())
	if values, err = charttest.HelmValues(values); err != nil {
		return err
	}
	d.values = values
	start := time.Now()
	if err := d.Install(ctx, values); err != nil {
		return err
	}
	return s.installed(ctx, in, "helm install", start)
}

// install is what both installs (chart, kustomize base) start from: the
// real node, the image on it, the release's namespace with the
// kubeconfigs' Secret and a volume, and the scenario's config turned into
// the pod's.
type install struct {
	d         *deployed
	serviceIP string
	cfg       map[string]any
	secrets   map[string]string
}

// aRealNode starts a real node in the cluster (held until the scenario's
// cleanup, which uninstalls flotilla from it and stops it), its pods on
// the node's bridge, reaching the host's loopback servers at the node's
// address (localfleet.RealNodeOptions.HostLoopback): the scenario's
// registry, sink and the fleet's API servers are named by that address
// from then on, in the pod and on the host alike.
func (s *scenario) aRealNode(ctx context.Context, cluster string) error {
	if s.w == nil {
		dir, err := os.MkdirTemp("", "flotilla-scenario-*")
		if err != nil {
			return err
		}
		s.w = &world{dir: dir, digests: map[string]string{}, pushes: map[string][]byte{}}
	}
	w := s.w
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	chartMu.Lock()
	nodeCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	node, err := s.fleet().StartRealNode(nodeCtx, cluster, localfleet.RealNodeOptions{KubeProxy: true, HostLoopback: true, Logger: log})
	if err != nil {
		chartMu.Unlock()
		return fmt.Errorf("starting a real node in %s: %w", cluster, err)
	}
	w.realNode = node
	s.onCleanup(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if d := w.deployed; d != nil {
			if s.failed {
				d.keepLogs(ctx, w.flotilla.logPath)
			}
			if err := d.Uninstall(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "uninstalling flotilla: %v\n", err)
			}
		}
		if err := node.Stop(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "stopping real node %s: %v\n", node.Name, err)
		}
		chartMu.Unlock()
	})
	return nil
}

// prepareInstall builds and pushes the image to the real node's registry
// and prepares the release's namespace.
func (s *scenario) prepareInstall(ctx context.Context) (*install, error) {
	w := s.w
	if w == nil || w.realNode == nil {
		return nil, errors.New("no real node: a step starting one must come first")
	}
	if w.flotilla == nil || w.flotilla.config == "" {
		return nil, errors.New("no flotilla config: a step configuring flotilla must come first")
	}
	node, cluster := w.realNode, w.realNode.Cluster
	d := &deployed{cluster: cluster, Release: charttest.Release{Namespace: "flotilla-" + w.namespace, Node: node, Chart: chartPath}}
	w.deployed = d
	c, err := s.clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	d.Kube = c.Kube
	if cl, ok := s.fleet().Cluster(cluster); ok {
		d.Kubeconfig = cl.Kubeconfig
	}
	if d.image, err = s.flotillaImage(ctx); err != nil {
		return nil, err
	}
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	_, p, _ := net.SplitHostPort(port)
	d.port, _ = strconv.Atoi(p)
	// A new address each install: the last one's may not be free yet.
	in := &install{d: d, serviceIP: fmt.Sprintf(chartServiceIPs, 100+chartInstalls.Add(1)%150)}
	cfg, secrets, kubeconfigs, err := chartConfig(w.flotilla.config, w.dir, w.flotilla.listen, net.JoinHostPort(in.serviceIP, p), node.Gateway)
	if err != nil {
		return nil, err
	}
	in.cfg, in.secrets = cfg, secrets
	return in, d.Prepare(ctx, kubeconfigs)
}

// installed waits for the pod Ready and then for its Service: every
// later step reaches flotilla through it.
func (s *scenario) installed(ctx context.Context, in *install, how string, start time.Time) error {
	d := in.d
	if err := d.WaitReady(ctx, ""); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: flotilla's pod Ready on %s %s after it (image %s)\n", how, d.Node.Name, time.Since(start).Round(time.Millisecond), d.image)
	// The pod's endpoint reaches kube-proxy a moment after the pod is
	// Ready; until then the Service refuses.
	s.w.flotilla.listen = net.JoinHostPort(in.serviceIP, strconv.Itoa(d.port))
	return charttest.WaitServing(ctx, s.w.flotilla.url()+"/readyz")
}

// flotillaImage is flotilla's image in the real node's registry, by
// digest: built and pushed by the scenario's first step that needs it.
func (s *scenario) flotillaImage(ctx context.Context) (string, error) {
	w := s.w
	if w == nil || w.realNode == nil {
		return "", errors.New("no real node: a step starting one must come first")
	}
	if w.image == "" {
		img, err := charttest.BuildImage(ctx, "..", w.realNode.Registry+"/flotilla-cd/flotilla", "v0.0.0-features", w.dir)
		if err != nil {
			return "", err
		}
		w.image = img
	}
	return w.image, nil
}

// chartConfig turns the scenario's config into the chart's: the chart sets
// the listen address and the data directory; the secret files become the
// chart's secrets (mounted at /etc/flotilla/secrets), the kubeconfigs a
// Secret of their own (mounted at /etc/flotilla/kubeconfigs); and the URLs
// of flotilla itself (Flagger's report hook) name its Service.
func chartConfig(path, dir, listen, service, hostAlias string) (cfg map[string]any, secrets, kubeconfigs map[string]string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, nil, err
	}
	b = bytes.ReplaceAll(b, []byte("http://"+listen+"/"), []byte("http://"+service+"/"))
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, nil, nil, err
	}
	// The pod's loopback is its own: the host's servers flotilla dials
	// itself are at hostAlias. (Those Flagger dials, such as the
	// canaries' webhooks and the metrics server, are the host's own.)
	if events, ok := cfg["events"].(map[string]any); ok {
		if sink, ok := events["sink"].(string); ok {
			events["sink"] = strings.Replace(sink, "//127.0.0.1:", "//"+hostAlias+":", 1)
		}
		if sinks, ok := events["cdevents"].([]any); ok {
			for i, u := range sinks {
				if u, ok := u.(string); ok {
					sinks[i] = strings.Replace(u, "//127.0.0.1:", "//"+hostAlias+":", 1)
				}
			}
		}
	}
	secrets, kubeconfigs, err = charttest.PodConfig(cfg, dir, hostAlias)
	return cfg, secrets, kubeconfigs, err
}

// chartPodReady reads the pod from the API server and its process from the
// host: Ready on the real node, its image the one built (by digest, as the
// node pulled it), run by user 65532 with the root filesystem mounted
// read-only.
func (s *scenario) chartPodReady(ctx context.Context) error {
	d := s.w.deployed
	p, err := d.Pod(ctx)
	if err != nil {
		return err
	}
	if !charttest.IsReady(p) || p.Spec.NodeName != d.Node.Name {
		return fmt.Errorf("pod %s on node %q, Ready %v; want Ready on %s", p.Name, p.Spec.NodeName, charttest.IsReady(p), d.Node.Name)
	}
	subnet, err := netip.ParsePrefix(d.Node.PodSubnet)
	if err != nil {
		return err
	}
	if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || p.Spec.HostNetwork || !subnet.Contains(ip) || ip.String() == d.Node.Gateway {
		return fmt.Errorf("pod %s at %q (hostNetwork %v); want an address of its own in the node's pod subnet %s", p.Name, p.Status.PodIP, p.Spec.HostNetwork, subnet)
	}
	var status *corev1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == "flotilla" {
			status = &p.Status.ContainerStatuses[i]
		}
	}
	if status == nil || !strings.HasSuffix(status.ImageID, "@"+strings.SplitN(d.image, "@", 2)[1]) {
		return fmt.Errorf("container status %+v, want the image %s", status, d.image)
	}
	pid, err := charttest.ProcessListening(d.port)
	if err != nil {
		return err
	}
	uid, ro, err := processIdentity(pid)
	if err != nil {
		return err
	}
	if uid != "65532" || !ro {
		return fmt.Errorf("flotilla's process %d runs as uid %s, root filesystem read-only %v; want 65532, true", pid, uid, ro)
	}
	rss := "RSS unknown"
	if m, err := charttest.ReadProcMemory(pid); err == nil {
		rss = fmt.Sprintf("RSS %d kB", m.VmRSS>>10)
	}
	fmt.Fprintf(os.Stderr, "chart: flotilla's process %d, uid %s, read-only root, %s idle\n", pid, uid, rss)
	return nil
}

// processIdentity is the process's real uid and whether its root
// filesystem is mounted read-only.
func processIdentity(pid int) (uid string, readOnly bool, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				uid = f[0]
			}
		}
	}
	mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return "", false, err
	}
	// The last mount on / is the one the process sees.
	sc := bufio.NewScanner(bytes.NewReader(mi))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 5 && f[4] == "/" {
			readOnly = slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	return uid, readOnly, nil
}

// keepLogs writes the pod's log (and its previous container's) where the
// scenario keeps flotilla's.
func (d *deployed) keepLogs(ctx context.Context, path string) {
	p, err := d.Pod(ctx)
	if err != nil {
		return
	}
	var out bytes.Buffer
	for _, c := range []string{"config-check", "flotilla"} {
		b, err := d.Kube.CoreV1().Pods(d.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c}).DoRaw(ctx)
		fmt.Fprintf(&out, "--- container %s (err %v):\n%s\n", c, err, b)
	}
	_ = os.WriteFile(path, out.Bytes(), 0o644)
}

// upgradeDuringPushes upgrades the release with a changed config (the
// pod's config checksum changes, so the chart's Recreate strategy replaces
// the pod) while a sender pushes n versions, one every `every`
// milliseconds, each notification retried until acknowledged as a
// registry's notification endpoint does, for up to a minute.
func (s *scenario) upgradeDuringPushes(ctx context.Context, n, every int) error {
	d := s.w.deployed
	old, err := d.Pod(ctx)
	if err != nil {
		return err
	}
	d.oldPod = string(old.UID)
	results := s.pushEvery(ctx, n, every)
	values := maps.Clone(d.values)
	cfg := maps.Clone(values["config"].(map[string]any))
	server := maps.Clone(cfg["server"].(map[string]any))
	server["retention"] = "240h"
	cfg["server"], values["config"] = server, cfg
	hc, ch, err := d.HelmChart()
	if err != nil {
		return err
	}
	up := action.NewUpgrade(hc)
	up.Namespace, up.Timeout = d.Namespace, 2*time.Minute
	start := time.Now()
	if _, err := up.RunWithContext(ctx, charttest.ReleaseName, ch, values); err != nil {
		return fmt.Errorf("helm upgrade: %w", err)
	}
	d.values = values
	if err := d.WaitReady(ctx, d.oldPod); err != nil {
		return err
	}
	replaced := time.Since(start).Round(time.Millisecond)
	var errs []error
	for r := range results {
		d.sent++
		if r.err != nil {
			errs = append(errs, fmt.Errorf("version %s: %w", r.version, r.err))
			continue
		}
		d.acked = append(d.acked, r.version)
		if !r.first {
			d.firstRefused++
		}
	}
	fmt.Fprintf(os.Stderr, "chart: helm upgrade, pod replaced and Ready in %s; pushes sent %d, acknowledged %d (%d after a refusal)\n",
		replaced, d.sent, len(d.acked), d.firstRefused)
	return errors.Join(errs...)
}

// pushResult is a version pushEvery pushed, and whether flotilla
// acknowledged its notification (err nil), at once (first) or after a
// refusal.
type pushResult struct {
	version string
	first   bool
	err     error
}

// pushEvery pushes n versions from 1.0.1 in the background, one every
// `every` milliseconds, each notification sent until acknowledged as a
// registry's notification endpoint does; the channel closes after the
// last (or the first that was never acknowledged).
func (s *scenario) pushEvery(ctx context.Context, n, every int) <-chan pushResult {
	results := make(chan pushResult, n)
	go func() {
		defer close(results)
		tick := time.NewTicker(time.Duration(every) * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			version := fmt.Sprintf("1.0.%d", i+1)
			body, err := s.push(version)
			if err != nil {
				results <- pushResult{version: version, err: err}
				return
			}
			first, err := s.notifyUntilAcknowledged(ctx, body)
			results <- pushResult{version: version, first: first, err: err}
			if err != nil {
				return
			}
			<-tick.C
		}
	}()
	return results
}

// notifyUntilAcknowledged posts a registry notification until flotilla
// answers 202, for up to a minute; first says the first try was.
func (s *scenario) notifyUntilAcknowledged(ctx context.Context, body []byte) (first bool, err error) {
	client := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(time.Minute)
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.w.flotilla.url()+"/hooks/registry", bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		req.Header.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
		req.Header.Set("Authorization", "Bearer "+s.w.registryToken)
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusAccepted {
				return try == 0, nil
			}
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("not acknowledged within a minute: %w", err)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// acknowledgedDelivered checks the pod is a new one and that every
// acknowledged push reached the event sink as image.pushed: what the old
// pod acknowledged survived in the journal on the volume.
func (s *scenario) acknowledgedDelivered(ctx context.Context) error {
	d := s.w.deployed
	p, err := d.Pod(ctx)
	if err != nil {
		return err
	}
	if string(p.UID) == d.oldPod {
		return errors.New("the upgrade left the old pod in place")
	}
	if len(d.acked) == 0 {
		return errors.New("no push was acknowledged")
	}
	lost := 0
	for _, v := range d.acked {
		if _, err := s.w.sink.waitFor(ctx, "image.pushed of "+v, func(e cloudevents.Event) bool {
			if e.Type() != events.TypeImagePushed {
				return false
			}
			p, err := events.Decode[events.ImagePushed](e)
			return err == nil && p.Tag == v
		}); err != nil {
			lost++
		}
	}
	fmt.Fprintf(os.Stderr, "chart: during helm upgrade: sent %d, acknowledged %d, lost %d\n", d.sent, len(d.acked), lost)
	if lost > 0 {
		return fmt.Errorf("%d of %d acknowledged pushes never reached the sink", lost, len(d.acked))
	}
	return nil
}

// installDefaults runs helm install of the chart with its default values
// into a namespace of its own.
func (s *scenario) installDefaults(ctx context.Context, cluster string) error {
	c, err := s.clientsFor(cluster)
	if err != nil {
		return err
	}
	cl, _ := s.fleet().Cluster(cluster)
	d := &deployed{cluster: cluster, Release: charttest.Release{Kubeconfig: cl.Kubeconfig, Namespace: "flotilla-defaults-" + randomHex(4), Kube: c.Kube, Chart: chartPath}}
	s.w = &world{dir: "", deployed: d}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: d.Namespace}}
	if _, err := d.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return err
	}
	s.onCleanup(func() { //nolint:contextcheck // a cleanup: it runs once the scenario's context has ended
		_ = d.Kube.CoreV1().Namespaces().Delete(context.Background(), d.Namespace, metav1.DeleteOptions{})
	})
	hc, ch, err := d.HelmChart()
	if err != nil {
		return err
	}
	install := action.NewInstall(hc)
	install.ReleaseName, install.Namespace = charttest.ReleaseName, d.Namespace
	_, err = install.RunWithContext(ctx, ch, map[string]any{})
	if err == nil {
		return errors.New("helm install of the default values succeeded")
	}
	s.w.lastError = err.Error()
	return nil
}

// defaultsRefused checks Helm's error names the values to set and that the
// namespace holds no object of the release (not even Helm's record).
func (s *scenario) defaultsRefused(ctx context.Context, first, second string) error {
	msg := s.w.lastError
	for _, want := range []string{first, second} {
		if !strings.Contains(msg, want) {
			return fmt.Errorf("helm install failed with %q, want it to name %s", msg, want)
		}
	}
	d := s.w.deployed
	secrets, err := d.Kube.CoreV1().Secrets(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	cms, err := d.Kube.CoreV1().ConfigMaps(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + charttest.ReleaseName})
	if err != nil {
		return err
	}
	deps, err := d.Kube.AppsV1().Deployments(d.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if n := len(secrets.Items) + len(cms.Items) + len(deps.Items); n != 0 {
		return fmt.Errorf("the refused install left %d Secrets, %d ConfigMaps, %d Deployments", len(secrets.Items), len(cms.Items), len(deps.Items))
	}
	return nil
}
