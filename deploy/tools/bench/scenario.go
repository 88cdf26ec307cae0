package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pipelines/embedded"
	"github.com/flotilla-cd/flotilla/pkg/app"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

const (
	appName   = "podinfo"
	workload  = "podinfo"
	container = "podinfo"
)

// named is one cluster of flotilla's configuration: a real cluster of the
// fleet, reached directly in the application's namespace, or through an
// nsProxy in a namespace of its own.
type named struct {
	name       string
	real       *realCluster
	namespace  string // where its objects really are
	kubeconfig string
	proxy      *nsProxyHandle
}

// scenario is one flotilla configuration: wave 1 and wave 2 of given sizes.
type scenario struct {
	b   *bench
	log *slog.Logger
	dir string
	ns  string
	// repo is the scenario's repository in the registry, its own: flotilla
	// polls its application's repository, and a scenario's flotilla must
	// not find the versions an earlier scenario pushed (it would roll the
	// newest out, by poll, over the bench's push).
	repo         string
	wave1, wave2 []*named
	// rec tells when flotilla applied a version to clusters: the recorder
	// around its executor in process, the clusters' Deployments read back
	// with flotilla in its pod (-pod).
	rec applies
	// pod is flotilla installed by its chart on a real node (-pod), nil
	// in process.
	pod *podFlotilla
	// srvs are flotilla's replicas (one in embedded mode), each with its
	// registry; url is the first's, urls every one's: requests go to them
	// in turn (next), as a Service spreads them.
	srvs  []*app.Server
	regs  []*prometheus.Registry
	url   string
	urls  []string
	next  atomic.Uint64
	stop  context.CancelFunc
	dones []chan error
	// replicas > 0 runs flotilla in scale-out mode: that many replicas on
	// the bench's NATS cluster.
	replicas     int
	regToken     string
	flaggerToken string
	// apiToken is flotilla's server.apiToken, sent with every API read
	// (#31: every read needs one).
	apiToken string
	http     *http.Client
	version  int
	// inflight rollouts of other applications (background.go) are held in
	// flight during the measured runs.
	inflight int
	// watchers streams of the watch stream are held open during the
	// measured runs (watchers.go).
	watchers int
	// deployed is the digest reference the fleet last converged on: what a
	// rollback goes back to.
	deployed string
	// runs measured rollouts, then rollbacks measured rollbacks.
	runs, rollbacks int
}

// scaled is d for up to 50 named clusters, and proportionally more above:
// the waits between measurements wait for every cluster's objects, which
// share the fleet's few real API servers.
func (s *scenario) scaled(d time.Duration) time.Duration {
	return d * time.Duration(max(1, (len(s.wave1)+len(s.wave2)+49)/50))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (b *bench) newScenario(ctx context.Context, index, wave2, inflight, watchers, replicas int) (*scenario, error) {
	ns := fmt.Sprintf("bench-%d", wave2)
	if replicas > 0 {
		ns += fmt.Sprintf("-so%d", replicas)
	}
	if inflight > 0 {
		ns += fmt.Sprintf("-inflight-%d", inflight)
	}
	if watchers > 0 {
		ns += fmt.Sprintf("-watchers-%d", watchers)
	}
	s := &scenario{
		b: b, log: b.log.With("wave2", wave2, "inflight", inflight, "watchers", watchers, "replicas", replicas), ns: ns, repo: "bench/" + ns, inflight: inflight, watchers: watchers, replicas: replicas,
		dir:      filepath.Join(b.dir, fmt.Sprintf("scenario-%d", index)),
		regToken: randomHex(16), flaggerToken: randomHex(16), apiToken: randomHex(16),
	}
	s.http = &http.Client{Transport: bearer{s.apiToken, &http.Transport{MaxIdleConnsPerHost: 64}}, Timeout: 30 * time.Second}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	// Wave 1 on c1, wave 2 round-robin on c2..cN; the first named cluster on
	// each real one is the real one, the others go through a proxy.
	perReal := map[string]int{}
	add := func(name string, rc *realCluster) (*named, error) {
		perReal[rc.name]++
		n := &named{name: name, real: rc, namespace: s.ns, kubeconfig: b.fleetKubeconfig(rc.name)}
		if perReal[rc.name] > 1 {
			n.namespace = s.ns + "-" + name
			p, err := b.openProxy(rc, s.ns, n.namespace)
			if err != nil {
				return nil, err
			}
			n.proxy = p
			n.kubeconfig = filepath.Join(s.dir, name+".kubeconfig")
			if err := writeProxyKubeconfig(n.kubeconfig, name, p); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
	for i := range b.o.wave1 {
		n, err := add(fmt.Sprintf("w1-%02d", i+1), b.real[0])
		if err != nil {
			s.close() //nolint:contextcheck // teardown outlives the caller's ctx
			return nil, err
		}
		s.wave1 = append(s.wave1, n)
	}
	for i := range wave2 {
		n, err := add(fmt.Sprintf("w2-%02d", i+1), b.real[1+i%(len(b.real)-1)])
		if err != nil {
			s.close() //nolint:contextcheck // teardown outlives the caller's ctx
			return nil, err
		}
		s.wave2 = append(s.wave2, n)
	}
	s.log.Info("creating workloads", "wave1", len(s.wave1), "wave2", len(s.wave2), "real_clusters", len(b.real))
	if err := s.createWorkloads(ctx); err != nil {
		s.close() //nolint:contextcheck // teardown outlives the caller's ctx
		return nil, err
	}
	if err := s.createBackgroundWorkloads(ctx); err != nil {
		s.close() //nolint:contextcheck // teardown outlives the caller's ctx
		return nil, err
	}
	if err := s.startFlotilla(ctx); err != nil {
		s.close() //nolint:contextcheck // teardown outlives the caller's ctx
		return nil, err
	}
	return s, nil
}

func (b *bench) fleetKubeconfig(name string) string {
	c, _ := b.fleet.Cluster(name)
	return c.Kubeconfig
}

func (s *scenario) all() []*named { return append(slices.Clone(s.wave1), s.wave2...) }

func (s *scenario) createWorkloads(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, n := range s.all() {
		g.Go(func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.namespace}}
			if _, err := n.real.kube.CoreV1().Namespaces().Create(gctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s in %s: %w", n.namespace, n.real.name, err)
			}
			labels := map[string]string{"app": workload}
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: workload, Namespace: n.namespace, Labels: labels},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{Containers: []corev1.Container{{
							Name: container, Image: s.b.regHost + "/" + s.repo + ":0.1.0",
							Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
						}}},
					},
				},
			}
			if _, err := n.real.kube.AppsV1().Deployments(n.namespace).Create(gctx, d, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating deployment in %s/%s: %w", n.real.name, n.namespace, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// applies tells when flotilla applied versions to the named clusters.
type applies interface {
	// wait returns the applies of ref to every one of clusters, waiting up
	// to timeout for them.
	wait(ctx context.Context, timeout time.Duration, ref string, clusters []string) (map[string]call, error)
	// forget drops what was seen of ref: a rollback applies it again.
	forget(ref string)
}

func (s *scenario) startFlotilla(ctx context.Context) error {
	cfgMap, err := s.flotillaConfig()
	if err != nil {
		return err
	}
	if s.b.pod != nil {
		return s.installPod(ctx, cfgMap)
	}
	return s.startInProcess(ctx, cfgMap)
}

// flotillaConfig is the scenario's configuration of flotilla, its secrets
// and the application's public key written to files of the scenario.
func (s *scenario) flotillaConfig() (map[string]any, error) {
	secret := func(name, value string) (map[string]string, error) {
		p := filepath.Join(s.dir, name)
		return map[string]string{"file": p}, os.WriteFile(p, []byte(value+"\n"), 0o600)
	}
	regSecret, err := secret("registry.token", s.regToken)
	if err != nil {
		return nil, err
	}
	flSecret, err := secret("flagger.token", s.flaggerToken)
	if err != nil {
		return nil, err
	}
	apiSecret, err := secret("api.token", s.apiToken)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(s.dir, "cosign.pub")
	if err := os.WriteFile(keyFile, s.b.signer.PublicKeyPEM(), 0o600); err != nil {
		return nil, err
	}
	var clusters []map[string]any
	names := func(ns []*named) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.name)
			clusters = append(clusters, map[string]any{"name": n.name, "kubeconfig": n.kubeconfig})
		}
		return out
	}
	waves := []map[string]any{
		{"name": "wave-1", "clusters": names(s.wave1)},
		{"name": "wave-2", "clusters": names(s.wave2)},
	}
	cfgMap := map[string]any{
		"server": map[string]any{"listen": "127.0.0.1:0", "dataDir": filepath.Join(s.dir, "data"), "apiToken": apiSecret},
		"receivers": []map[string]any{
			{"name": "registry", "type": "distribution", "secret": regSecret},
			{"name": "flagger", "type": "flagger", "secret": flSecret},
		},
		"fleet": map[string]any{"clusters": clusters, "waves": waves},
		"applications": append([]map[string]any{{
			"name": appName, "image": s.b.regHost + "/" + s.repo, "track": "MajorVersion", "namespace": s.ns,
			"workload": map[string]any{"kind": "Deployment", "name": workload},
			"service":  map[string]any{"port": 9898},
			"delivery": map[string]any{
				"strategy": "blueGreen", "interval": s.b.o.interval.String(), "iterations": 10, "threshold": 1,
				"progressDeadline": "10m",
			},
			// The bench's own signer logs nowhere: it measures verifying
			// the signature, not the log.
			"verify": map[string]any{"ignoreTlog": true, "signatures": []map[string]any{{"name": "bench", "key": map[string]any{"file": keyFile}}}},
		}}, s.backgroundApps()...),
	}
	return cfgMap, nil
}

// startInProcess runs flotilla's main job in this process with cfgMap,
// its executor wrapped by the recorder.
func (s *scenario) startInProcess(ctx context.Context, cfgMap map[string]any) error {
	raw, err := yaml.Marshal(cfgMap)
	if err != nil {
		return err
	}
	path := filepath.Join(s.dir, "flotilla.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	set, err := cluster.NewSet(cfg.Fleet.Clusters)
	if err != nil {
		return err
	}
	rec := newRecorder(embedded.New(set))
	s.rec = rec
	logger := slog.New(slog.DiscardHandler)
	if s.b.o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if s.replicas == 0 {
		return s.startReplicas(ctx, []*config.Config{cfg}, rec, logger)
	}
	// Scale-out mode: a stream of the scenario's own on the bench's NATS
	// cluster, replicated on its three nodes, and one config per replica
	// (its name).
	var cfgs []*config.Config
	for i := range s.replicas {
		cfgMap["server"] = map[string]any{"listen": "127.0.0.1:0", "dataDir": filepath.Join(s.dir, fmt.Sprintf("data-r%d", i)), "apiToken": cfgMap["server"].(map[string]any)["apiToken"], "bus": map[string]any{
			"url": s.b.nats.URL(), "stream": "BENCH_" + strings.ReplaceAll(s.ns, "-", "_"), "replicas": 3, "partitions": 6, "replica": fmt.Sprintf("r%d", i),
		}}
		raw, err := yaml.Marshal(cfgMap)
		if err != nil {
			return err
		}
		path := filepath.Join(s.dir, fmt.Sprintf("flotilla-r%d.yaml", i))
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			return err
		}
		c, err := config.Load(path)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, c)
	}
	return s.startReplicas(ctx, cfgs, rec, logger)
}

// startReplicas runs flotilla's main job once per config, in process, and
// waits until every one is ready.
func (s *scenario) startReplicas(ctx context.Context, cfgs []*config.Config, rec *recorder, logger *slog.Logger) error {
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = cancel
	for _, cfg := range cfgs {
		reg := prometheus.NewRegistry()
		srv, err := app.New(ctx, cfg, app.Options{Executor: rec, Logger: logger, Registry: reg})
		if err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- srv.Run(runCtx) }()
		s.srvs, s.regs, s.dones = append(s.srvs, srv), append(s.regs, reg), append(s.dones, done)
		s.urls = append(s.urls, "http://"+srv.Addr())
	}
	s.url = s.urls[0]
	for _, u := range s.urls {
		if err := s.until(ctx, 30*time.Second, "flotilla ready", func() (bool, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/readyz", nil)
			if err != nil {
				return false, err
			}
			resp, err := s.http.Do(req)
			if err != nil {
				return false, nil
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// times sums the functions' times over the replicas' registries (one
// Gatherers over them refuses the series they share).
func (s *scenario) times() fnTimes {
	out := fnTimes{}
	for _, r := range s.regs {
		for k, v := range gatherTimes(r) {
			out[k] += v
		}
	}
	return out
}

// target is the URL of the next request: the replicas' in turn.
func (s *scenario) target() string {
	return s.urls[s.next.Add(1)%uint64(len(s.urls))]
}

func (s *scenario) close() {
	if s.stop != nil {
		s.stop()
		for i, done := range s.dones {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("flotilla stopped with an error", "error", err)
			}
			_ = s.srvs[i].Close()
		}
	}
	if s.pod != nil {
		s.pod.uninstall()
	}
	for _, n := range s.all() {
		if n.proxy != nil {
			n.proxy.close()
		}
	}
}

// until polls cond every 2 ms until it holds, fails, or timeout passes. Used
// only between measurements, never inside one.
func (s *scenario) until(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		start := time.Now()
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		// Poll every 2 ms, but spend at most a third of the time polling:
		// a read of a 1,001-cluster rollout through the API costs flotilla
		// and the bench about 300 ms of CPU, and polling it every 2 ms took
		// a quarter of the large scenario's CPU (BENCHMARKS.md).
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(max(2*time.Millisecond, 2*time.Since(start))):
		}
	}
}

// sample is one measured rollout.
type sample struct {
	ack       time.Duration // notification POST -> 202
	a         time.Duration // notification POST -> first wave-1 apply request
	bFirst    time.Duration // last wave-1 Succeeded POST -> first wave-2 apply request
	b         time.Duration // ... -> last wave-2 apply request
	bComplete time.Duration // ... -> last wave-2 apply returned
	bAck      time.Duration // last wave-1 Succeeded POST -> 202
	// A rollback run (after B): a wave-2 canary's failure event POSTed ->
	// the last wave-2 revert request started, and returned.
	c, cComplete time.Duration
	// Where B's time went: flotilla's functions' own handling time (their
	// metrics) between B's start and the last wave-2 apply request.
	observe, advance, journal time.Duration
	// CPU time burnt from B's start to the last wave-2 apply's return: by the
	// fleet's processes, and by this process (flotilla, proxies, bench).
	fleetCPU, selfCPU time.Duration
	// selfCPUB, fleetCPUB: the CPU the bench's process and the fleet
	// burnt in B's window alone (-v, with the recorder: -bprofile's end).
	selfCPUB, fleetCPUB time.Duration
	// idleB, stealB: the machine's CPUs idle, and stolen by the
	// hypervisor, in B's window (-v).
	idleB, stealB time.Duration
	// The worst time this process waited to run during A's and B's windows
	// (see stallProbe), and how many Flagger events observe handled in B's
	// window (1 is the bench's own; more were Flagger's, queued with it).
	stallA, stallB time.Duration // longest
	waitA, waitB   time.Duration // total
	observeCalls   int
}

func (s *scenario) run(ctx context.Context) (res scenarioResult, err error) {
	res = scenarioResult{wave1: len(s.wave1), wave2: len(s.wave2), realClusters: len(s.b.real), replicas: s.replicas}
	for _, n := range s.all() {
		if n.proxy != nil {
			res.proxied++
		}
	}
	total := s.b.o.warmup + s.runs
	start := time.Now()
	for i := range total {
		warm := i < s.b.o.warmup
		if i == s.b.o.warmup && s.watchers > 0 {
			w := startWatchers(ctx, s.url, s.apiToken, s.watchers)
			res.watchers = s.watchers
			defer func() { res.watchMessages, res.watchReconnects = w.stop() }()
			s.log.Info("watchers open", "watchers", s.watchers)
		}
		if i == s.b.o.warmup && s.inflight > 0 {
			if err := s.background(ctx, &res); err != nil {
				return res, fmt.Errorf("holding %d rollouts in flight: %w", s.inflight, err)
			}
		}
		smp, err := s.rollout(ctx, i == 0, false)
		if err != nil {
			return res, fmt.Errorf("run %d: %w", i+1, err)
		}
		if s.b.o.verbose || warm {
			s.log.Info("run", "n", i+1, "warmup", warm, "ack", ms(smp.ack), "A", ms(smp.a), "B_first", ms(smp.bFirst), "B", ms(smp.b), "B_complete", ms(smp.bComplete), "B_ack", ms(smp.bAck), "observe", ms(smp.observe), "advance", ms(smp.advance), "journal", ms(smp.journal), "fleet_cpu", ms(smp.fleetCPU), "self_cpu", ms(smp.selfCPU), "self_cpu_B", ms(smp.selfCPUB), "fleet_cpu_B", ms(smp.fleetCPUB), "idle_B", ms(smp.idleB), "steal_B", ms(smp.stealB), "stall_A", ms(smp.stallA), "wait_A", ms(smp.waitA), "stall_B", ms(smp.stallB), "wait_B", ms(smp.waitB), "observe_calls", smp.observeCalls)
		}
		if !warm {
			res.samples = append(res.samples, smp)
		}
	}
	for i := range s.rollbacks {
		if s.inflight > 0 || s.watchers > 0 {
			break // measured without other rollouts in flight or watchers only
		}
		smp, err := s.rollout(ctx, false, true)
		if err != nil {
			return res, fmt.Errorf("rollback run %d: %w", i+1, err)
		}
		if s.b.o.verbose {
			s.log.Info("rollback run", "n", i+1, "C", ms(smp.c), "C_complete", ms(smp.cComplete))
		}
		res.rollbacks = append(res.rollbacks, smp)
	}
	res.took = time.Since(start)
	if s.inflight > 0 {
		res.rssEnd, res.heapEnd = selfRSS(), heapInUse()
		if err := s.stillInFlight(ctx); err != nil {
			return res, err
		}
	}
	return res, nil
}

// rollout pushes a new version and drives its rollout to the end.
// initialize waits for Flagger to initialize every canary first (the first
// rollout of a scenario creates them). fail fails a wave-2 canary once wave
// 2 is applied and measures the rollback (C), which it then drives to its
// end.
func (s *scenario) rollout(ctx context.Context, initialize, fail bool) (sample, error) {
	var smp sample
	s.version++
	version := fmt.Sprintf("%d.0.0", s.version)
	ref, body, err := s.push(ctx, version)
	if err != nil {
		return smp, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
	h.Set("Authorization", "Bearer "+s.regToken)

	// A: notification -> wave 1's first apply request.
	t0 := time.Now()
	if err := s.post(ctx, "/hooks/registry", h, body); err != nil {
		return smp, err
	}
	smp.ack = time.Since(t0)
	w1, err := s.rec.wait(ctx, s.scaled(time.Minute), ref, names(s.wave1))
	if err != nil {
		return smp, fmt.Errorf("waiting for wave 1 of %s to be applied: %w", version, err)
	}
	first := earliest(w1)
	smp.a = first.start.Sub(t0)
	smp.stallA, smp.waitA = s.b.probe.within(t0, first.start)
	id := first.rollout

	// Between the measurements: flotilla has recorded wave 1 as applied.
	if err := s.waitClusters(ctx, id, s.wave1, func(p rollout.ClusterPhase) bool {
		return p == rollout.ClusterProgressing || p == rollout.ClusterSucceeded
	}); err != nil {
		return smp, err
	}
	if initialize {
		if err := s.waitInitialized(ctx, s.wave1); err != nil {
			return smp, err
		}
	}
	last := s.wave1[len(s.wave1)-1]
	if err := s.promote(ctx, s.wave1[:len(s.wave1)-1], ref); err != nil {
		return smp, err
	}
	if err := s.promotePrimary(ctx, last, ref); err != nil {
		return smp, err
	}
	if err := s.report(ctx, id, s.wave1[:len(s.wave1)-1]); err != nil {
		return smp, err
	}
	if err := s.waitClusters(ctx, id, s.wave1[:len(s.wave1)-1], func(p rollout.ClusterPhase) bool { return p == rollout.ClusterSucceeded }); err != nil {
		return smp, err
	}
	stopProfile, err := s.startBProfile()
	if err != nil {
		return smp, err
	}
	defer stopProfile()
	time.Sleep(20 * time.Millisecond) // let the runtime go idle

	// B: wave 1's last canary Succeeded -> every canary of wave 2 applied.
	// The clock starts when the canary's status says so (flotilla watches
	// canaries too), then its event is POSTed, as Flagger does.
	evBody := s.promotionEvent(last, id)
	before := s.times()
	pids := s.b.fleetPIDs()
	fleet0, self0 := cpuTime(pids...), cpuTime(os.Getpid())
	idle0, steal0 := machineCPU()
	t2 := time.Now()
	if err := s.markSucceeded(ctx, last); err != nil {
		return smp, err
	}
	t3 := time.Now()
	if err := s.post(ctx, "/hooks/flagger/"+s.flaggerToken, http.Header{"Content-Type": {"application/json"}}, evBody); err != nil {
		return smp, err
	}
	smp.bAck = time.Since(t3)
	if rec, ok := s.rec.(*recorder); ok && (s.b.o.bprofile != "" || s.b.o.btrace != "" || s.b.o.verbose) {
		if err := rec.waitStarted(ctx, s.scaled(time.Minute), ref, names(s.wave2)); err != nil {
			return smp, fmt.Errorf("waiting for wave 2 of %s to be requested: %w", version, err)
		}
		smp.fleetCPUB, smp.selfCPUB = cpuTime(pids...)-fleet0, cpuTime(os.Getpid())-self0
		idle, steal := machineCPU()
		smp.idleB, smp.stealB = idle-idle0, steal-steal0
		stopProfile() // B's window alone: the applies' own work is not in it
	}
	w2, err := s.rec.wait(ctx, s.scaled(time.Minute), ref, names(s.wave2))
	if err != nil {
		return smp, fmt.Errorf("waiting for wave 2 of %s to be applied: %w", version, err)
	}
	stopProfile()
	for _, c := range w2 {
		smp.b = max(smp.b, c.start.Sub(t2))
		smp.bComplete = max(smp.bComplete, c.end.Sub(t2))
	}
	smp.bFirst = earliest(w2).start.Sub(t2)
	smp.stallB, smp.waitB = s.b.probe.within(t2, t2.Add(smp.b))
	smp.fleetCPU, smp.selfCPU = cpuTime(pids...)-fleet0, cpuTime(os.Getpid())-self0
	spent := s.times().sub(before)
	smp.observe, smp.advance, smp.journal = spent["observe"], spent["advance"], spent["journal"]
	smp.observeCalls = int(spent["observe_calls"])
	if s.b.o.trace {
		var starts, durs []string
		cs := make([]call, 0, len(w2))
		for _, c := range w2 {
			cs = append(cs, c)
		}
		slices.SortFunc(cs, func(a, b call) int { return a.start.Compare(b.start) })
		for _, c := range cs {
			starts = append(starts, ms(c.start.Sub(t2)))
			durs = append(durs, ms(c.end.Sub(c.start)))
		}
		fmt.Fprintf(os.Stderr, "trace starts: %v\ntrace durations: %v\n", starts, durs)
	}

	// Finish the rollout so the next one starts from a quiet flotilla.
	if err := s.waitClusters(ctx, id, s.wave2, func(p rollout.ClusterPhase) bool {
		return p == rollout.ClusterProgressing || p == rollout.ClusterSucceeded
	}); err != nil {
		return smp, err
	}
	if fail {
		return smp, s.rollback(ctx, id, &smp)
	}
	if initialize {
		if err := s.waitInitialized(ctx, s.wave2); err != nil {
			return smp, err
		}
	}
	if err := s.promote(ctx, s.wave2, ref); err != nil {
		return smp, err
	}
	if err := s.report(ctx, id, s.wave2); err != nil {
		return smp, err
	}
	err = s.until(ctx, s.scaled(time.Minute), "rollout "+id+" to succeed", func() (bool, error) {
		ro, err := s.getRollout(ctx, id)
		if err != nil {
			return false, err
		}
		if ro.Phase != rollout.Progressing && ro.Phase != rollout.Succeeded {
			return false, fmt.Errorf("rollout %s is %s: %s", id, ro.Phase, ro.Reason)
		}
		return ro.Phase == rollout.Succeeded, nil
	})
	if err != nil {
		return smp, err
	}
	s.deployed = ref
	return smp, s.settle(ctx)
}

// rollback fails the first wave-2 canary of rollout id (the event Flagger
// sends when its analysis fails) and measures C: until every wave-2
// cluster's revert to the deployed version was requested, and returned.
// Then it does what Flagger does when a revert is promoted (the primary
// runs the previous image, the canary is Succeeded, and its event) until
// the rollout is RolledBack: wave 2 first, then wave 1.
func (s *scenario) rollback(ctx context.Context, id string, smp *sample) error {
	if s.deployed == "" {
		return errors.New("a rollback run needs a version rolled out before it")
	}
	s.rec.forget(s.deployed)
	t3 := time.Now()
	if err := s.post(ctx, "/hooks/flagger/"+s.flaggerToken, http.Header{"Content-Type": {"application/json"}}, s.failureEvent(s.wave2[0], id)); err != nil {
		return err
	}
	w3, err := s.rec.wait(ctx, s.scaled(time.Minute), s.deployed, names(s.wave2))
	if err != nil {
		return fmt.Errorf("waiting for wave 2's reverts of %s: %w", id, err)
	}
	for _, c := range w3 {
		smp.c = max(smp.c, c.start.Sub(t3))
		smp.cComplete = max(smp.cComplete, c.end.Sub(t3))
	}
	err = s.until(ctx, s.scaled(2*time.Minute), "rollout "+id+" to be rolled back", func() (bool, error) {
		ro, err := s.getRollout(ctx, id)
		if err != nil {
			return false, err
		}
		switch ro.Phase {
		case rollout.RolledBack:
			return true, nil
		case rollout.Failed:
		default:
			return false, fmt.Errorf("rollout %s is %s: %s", id, ro.Phase, ro.Reason)
		}
		var reverting []*named
		for _, n := range s.all() {
			if c, _, err := ro.Cluster(n.name); err == nil && c.Phase == rollout.ClusterReverting && c.Run == "" {
				reverting = append(reverting, n)
			}
		}
		if err := s.promote(ctx, reverting, s.deployed); err != nil {
			return false, err
		}
		return false, s.report(ctx, id, reverting)
	})
	if err != nil {
		return err
	}
	return s.settle(ctx)
}

// failureEvent is the event webhook payload Flagger sends when the analysis
// of n's canary failed.
func (s *scenario) failureEvent(n *named, rolloutID string) []byte {
	b, _ := json.Marshal(flaggerv1.CanaryWebhookPayload{
		Name: workload, Namespace: n.namespace, Phase: flaggerv1.CanaryPhaseFailed, Checksum: randomHex(5),
		Metadata: map[string]string{
			"cluster": n.name, "rollout": rolloutID,
			"eventMessage": "Canary failed! Rolling back " + workload + "." + n.namespace,
			"eventType":    corev1.EventTypeWarning,
			"timestamp":    strconv.FormatInt(time.Now().UnixMilli(), 10),
		},
	})
	return b
}

// settle waits until the clusters' controllers have caught up with the
// rollout (every Deployment rolled out), then a little more, so that one
// run's aftermath does not load the next one's measurement: on a real fleet
// that work happens on the clusters' own machines, not on flotilla's.
func (s *scenario) settle(ctx context.Context) error {
	for _, n := range s.all() {
		for _, d := range []string{workload, workload + "-primary"} {
			err := s.until(ctx, 2*time.Minute, n.name+" "+d+" rolled out", func() (bool, error) {
				dep, err := n.real.kube.AppsV1().Deployments(n.namespace).Get(ctx, d, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				want := ptr.Deref(dep.Spec.Replicas, 1)
				st := dep.Status
				return st.ObservedGeneration >= dep.Generation && st.UpdatedReplicas == want &&
					st.Replicas == want && st.AvailableReplicas == want, nil
			})
			if err != nil {
				return err
			}
		}
	}
	time.Sleep(s.b.o.settle)
	return nil
}

func names(ns []*named) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return out
}

func earliest(calls map[string]call) call {
	var first call
	for _, c := range calls {
		if first.start.IsZero() || c.start.Before(first.start) {
			first = c
		}
	}
	return first
}

// push writes a new random image as repo:version, signs it as cosign
// does (its .sig tag), and returns its pinned reference and the
// notification the registry would send for it.
func (s *scenario) push(ctx context.Context, version string) (string, []byte, error) {
	ref, body, err := s.pushRepo(s.repo, version)
	if err != nil {
		return "", nil, err
	}
	d, err := name.NewDigest(ref)
	if err != nil {
		return "", nil, err
	}
	if err := sigtest.SignLegacy(ctx, d, s.b.signer, nil); err != nil {
		return "", nil, fmt.Errorf("signing %s: %w", d, err)
	}
	return ref, body, nil
}

// pushRepo pushes repo:version (a repository of the registry).
func (s *scenario) pushRepo(repo, version string) (string, []byte, error) {
	img, err := random.Image(256, 1)
	if err != nil {
		return "", nil, err
	}
	tag, err := name.NewTag(s.b.regHost + "/" + repo + ":" + version)
	if err != nil {
		return "", nil, err
	}
	if err := remote.Write(tag, img); err != nil {
		return "", nil, fmt.Errorf("pushing %s: %w", tag, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", nil, err
	}
	mt, err := img.MediaType()
	if err != nil {
		return "", nil, err
	}
	size, err := img.Size()
	if err != nil {
		return "", nil, err
	}
	host := s.b.regHost
	body, err := json.Marshal(map[string]any{"events": []map[string]any{{
		"id": randomHex(8), "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "action": "push",
		"target": map[string]any{
			"mediaType": string(mt), "digest": d.String(), "size": size, "length": size,
			"repository": repo, "url": fmt.Sprintf("http://%s/v2/%s/manifests/%s", host, repo, d), "tag": version,
		},
		"request": map[string]any{"id": randomHex(8), "addr": "127.0.0.1:40000", "host": host, "method": "PUT", "useragent": "go-containerregistry"},
		"actor":   map[string]any{"name": "ci"},
		"source":  map[string]any{"addr": "registry:5000", "instanceID": "bench"},
	}}})
	return host + "/" + repo + "@" + d.String(), body, err
}

func (s *scenario) post(ctx context.Context, path string, h http.Header, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target()+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = h
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("POST %s answered %d: %s", path, resp.StatusCode, msg)
	}
	return nil
}

func (s *scenario) getRollout(ctx context.Context, id string) (rollout.Rollout, error) {
	var ro rollout.Rollout
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/rollouts/"+id, nil)
	if err != nil {
		return ro, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return ro, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return ro, fmt.Errorf("GET rollout %s: %s", id, resp.Status)
	}
	return ro, json.NewDecoder(resp.Body).Decode(&ro)
}

// waitClusters waits until flotilla's record of every cluster in ns satisfies ok.
func (s *scenario) waitClusters(ctx context.Context, id string, ns []*named, ok func(rollout.ClusterPhase) bool) error {
	return s.until(ctx, s.scaled(time.Minute), "clusters of "+id, func() (bool, error) {
		ro, err := s.getRollout(ctx, id)
		if err != nil {
			return false, err
		}
		for _, n := range ns {
			c, _, err := ro.Cluster(n.name)
			if err != nil {
				return false, err
			}
			if c.Phase == rollout.ClusterFailed {
				return false, fmt.Errorf("cluster %s failed in rollout %s: %s", n.name, id, c.Message)
			}
			if !ok(c.Phase) {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitInitialized waits until Flagger has initialized the canary of every
// cluster in ns (made <workload>-primary).
func (s *scenario) waitInitialized(ctx context.Context, ns []*named) error {
	for _, n := range ns {
		err := s.until(ctx, s.scaled(5*time.Minute), "Flagger to initialize "+n.name, func() (bool, error) {
			c, err := n.real.flagger.FlaggerV1beta1().Canaries(n.namespace).Get(ctx, workload, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			switch c.Status.Phase {
			case flaggerv1.CanaryPhaseInitialized, flaggerv1.CanaryPhaseSucceeded:
			default:
				return false, nil
			}
			_, err = n.real.kube.AppsV1().Deployments(n.namespace).Get(ctx, workload+"-primary", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// promote does in each cluster what Flagger does when it promotes a canary:
// the primary runs the canary's image and the canary's phase is Succeeded.
func (s *scenario) promote(ctx context.Context, ns []*named, ref string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, n := range ns {
		g.Go(func() error {
			if err := s.promotePrimary(gctx, n, ref); err != nil {
				return err
			}
			return s.markSucceeded(gctx, n)
		})
	}
	return g.Wait()
}

// promotePrimary makes n's primary run ref, as Flagger's promotion does.
func (s *scenario) promotePrimary(ctx context.Context, n *named, ref string) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, container, ref)
	if _, err := n.real.kube.AppsV1().Deployments(n.namespace).Patch(ctx, workload+"-primary", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("promoting the primary in %s: %w", n.name, err)
	}
	return nil
}

// markSucceeded sets n's canary's phase to Succeeded, as Flagger does
// once the primary runs the new version.
func (s *scenario) markSucceeded(ctx context.Context, n *named) error {
	status := fmt.Appendf(nil, `{"status":{"phase":%q,"lastTransitionTime":%q}}`, flaggerv1.CanaryPhaseSucceeded, time.Now().UTC().Format(time.RFC3339))
	if _, err := n.real.flagger.FlaggerV1beta1().Canaries(n.namespace).Patch(ctx, workload, types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("setting the canary's status in %s: %w", n.name, err)
	}
	return nil
}

// startBProfile starts -bprofile's CPU profile and -btrace's execution
// trace of this rollout's B window; the func it returns stops them (once;
// later calls do nothing).
func (s *scenario) startBProfile() (func(), error) {
	var stops []func()
	stopAll := sync.OnceFunc(func() {
		for _, stop := range stops {
			stop()
		}
	})
	name := fmt.Sprintf("%s-%d", filepath.Base(s.dir), s.version)
	if s.b.o.bprofile != "" {
		stop, err := startCPUProfile(s.b.o.bprofile + "-" + name + ".pprof")
		if err != nil {
			return nil, err
		}
		stops = append(stops, stop)
	}
	if s.b.o.btrace != "" {
		stop, err := startTrace(s.b.o.btrace + "-" + name + ".trace")
		if err != nil {
			stopAll()
			return nil, err
		}
		stops = append(stops, stop)
	}
	return stopAll, nil
}

// promotionEvent is the event webhook payload Flagger sends when it has
// promoted the canary of n (flotilla's hook metadata merged in).
func (s *scenario) promotionEvent(n *named, rolloutID string) []byte {
	b, _ := json.Marshal(flaggerv1.CanaryWebhookPayload{
		Name: workload, Namespace: n.namespace, Phase: flaggerv1.CanaryPhaseSucceeded, Checksum: randomHex(5),
		Metadata: map[string]string{
			"cluster": n.name, "rollout": rolloutID,
			"eventMessage": "Promotion completed! Scaling down " + workload + "." + n.namespace,
			"eventType":    corev1.EventTypeNormal,
			"timestamp":    strconv.FormatInt(time.Now().UnixMilli(), 10),
		},
	})
	return b
}

// report POSTs the promotion events of ns, 8 at a time.
func (s *scenario) report(ctx context.Context, id string, ns []*named) error {
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, n := range ns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := s.post(ctx, "/hooks/flagger/"+s.flaggerToken, http.Header{"Content-Type": {"application/json"}}, s.promotionEvent(n, id)); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bearer sends flotilla's API token with every request of its transport
// to the API (/api/...); webhooks keep their receivers' authentication.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}
