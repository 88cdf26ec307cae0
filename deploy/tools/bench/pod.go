package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/testkit/charttest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// podServiceIP is the fixed cluster IP of flotilla's Service in -pod mode,
// in the lower ("static") band of the fleet's 10.96.0.0/16 that the API
// server leaves to fixed addresses: the config names it (Flagger's
// callbacks) before the Service exists. The features' chart scenarios use
// 10.96.0.100-249.
const podServiceIP = "10.96.0.250"

// podNode is the real node of c1 that runs flotilla's pod (-pod), and
// flotilla's image in its registry, by digest.
type podNode struct {
	node  *localfleet.RealNode
	image string
}

// startPodNode starts a real node in c1 whose pods reach the host's
// loopback servers at its address (HostLoopback), names the bench's
// registry by that address from then on (for the pod and this process
// alike), and builds flotilla's image into the node's registry.
func (b *bench) startPodNode(ctx context.Context) error {
	nodeCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	node, err := b.fleet.StartRealNode(nodeCtx, b.real[0].name, localfleet.RealNodeOptions{KubeProxy: true, HostLoopback: true, Logger: b.log})
	if err != nil {
		return fmt.Errorf("starting a real node in %s (needs root): %w", b.real[0].name, err)
	}
	b.pod = &podNode{node: node}
	b.log.Info("real node ready", "node", node.Name, "gateway", node.Gateway, "took", time.Since(start).Round(time.Second))
	_, port, err := net.SplitHostPort(b.regHost)
	if err != nil {
		return fmt.Errorf("parsing the registry's address: %w", err)
	}
	b.regHost = net.JoinHostPort(node.Gateway, port)
	buildCtx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	start = time.Now()
	if b.pod.image, err = charttest.BuildImage(buildCtx, ".", node.Registry+"/flotilla-cd/flotilla", "v0.0.0-bench", b.dir); err != nil {
		return err
	}
	b.log.Info("image built and pushed", "image", b.pod.image, "took", time.Since(start).Round(time.Second))
	return nil
}

// stopPodNode stops the real node, if one was started.
func (b *bench) stopPodNode() {
	if b.pod == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.pod.node.Stop(ctx); err != nil {
		b.log.Warn("stopping the real node", "error", err)
	}
}

// podFlotilla is flotilla installed by its chart on the real node (-pod):
// the release, the port its container and Service listen on, and its
// process as the host sees it.
type podFlotilla struct {
	release *charttest.Release
	port    int
	pid     int
	ready   time.Duration // helm install -> pod Ready and served
}

// installPod installs flotilla by its chart on the real node, with
// cfgMap turned into the pod's config: the kubeconfigs and secret files in
// Secrets, the clusters and the registry named by the node's address, and
// its Service's address as the URL Flagger calls back. From then on the
// scenario reaches flotilla through that Service, and reads what it
// applied from the clusters (observedApplies).
func (s *scenario) installPod(ctx context.Context, cfgMap map[string]any) error {
	pn, c1 := s.b.pod, s.b.real[0]
	port, err := freeport.Port(ctx)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://%s:%d", podServiceIP, port)
	cfgMap["server"] = map[string]any{"externalURL": url, "apiToken": cfgMap["server"].(map[string]any)["apiToken"]}
	cfg, err := charttest.HelmValues(cfgMap)
	if err != nil {
		return err
	}
	secrets, kubeconfigs, err := charttest.PodConfig(cfg, s.dir, pn.node.Gateway)
	if err != nil {
		return fmt.Errorf("making the pod's config: %w", err)
	}
	rel := &charttest.Release{Namespace: "flotilla-" + s.ns, Kubeconfig: s.b.fleetKubeconfig(c1.name), Kube: c1.kube, Node: pn.node, Chart: s.b.o.chart}
	s.pod = &podFlotilla{release: rel, port: port}
	if err := rel.Prepare(ctx, kubeconfigs); err != nil {
		return err
	}
	repo, digest, _ := strings.Cut(pn.image, "@")
	values := map[string]any{
		"image":       map[string]any{"repository": repo, "digest": digest},
		"config":      cfg,
		"secrets":     secrets,
		"kubeconfigs": map[string]any{"existingSecret": charttest.KubeconfigsSecret},
		"service":     map[string]any{"port": port, "clusterIP": podServiceIP},
		"persistence": map[string]any{"storageClass": "", "size": "64Mi", "keepOnUninstall": false},
	}
	maps.Copy(values, charttest.NodeValues())
	if values, err = charttest.HelmValues(values); err != nil {
		return err
	}
	start := time.Now()
	if err := rel.Install(ctx, values); err != nil {
		return err
	}
	if err := rel.WaitReady(ctx, ""); err != nil {
		return err
	}
	if err := charttest.WaitServing(ctx, url+"/readyz"); err != nil {
		return err
	}
	s.pod.ready = time.Since(start)
	if s.pod.pid, err = charttest.ProcessListening(port); err != nil {
		return err
	}
	s.url, s.urls = url, []string{url}
	s.rec = &observedApplies{s: s}
	s.log.Info("flotilla's pod Ready", "image", pn.image, "service", url, "pid", s.pod.pid, "took", s.pod.ready.Round(time.Millisecond))
	return nil
}

// uninstall removes the release.
func (p *podFlotilla) uninstall() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = p.release.Uninstall(ctx)
}

// observedApplies tells when flotilla in its pod applied a version: it
// reads every named cluster's Deployment from the real API servers (one
// list per real cluster every 100 ms) until its container runs the
// version; the rollout's id it asks flotilla. Its times are when a read
// saw the apply, not when it was requested: -pod measures memory, not
// latency.
type observedApplies struct{ s *scenario }

func (a *observedApplies) wait(ctx context.Context, timeout time.Duration, ref string, clusters []string) (map[string]call, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	seen := map[string]call{}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		images, err := a.s.images(ctx, workload)
		if err == nil {
			for _, c := range clusters {
				if _, ok := seen[c]; !ok && images[c] == ref {
					seen[c] = call{start: now, end: now}
				}
			}
		}
		if len(seen) == len(clusters) {
			id, err := a.s.rolloutOf(ctx, ref)
			if err != nil {
				return nil, err
			}
			for c, k := range seen {
				k.rollout = id
				seen[c] = k
			}
			return seen, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d clusters run %s: %w (last read: %w)", len(seen), len(clusters), ref, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (a *observedApplies) forget(string) {}

// images is the image of the first container of the Deployment name in
// every named cluster, one list per real cluster.
func (s *scenario) images(ctx context.Context, name string) (map[string]string, error) {
	byNS := map[string]map[string]string{} // real cluster -> namespace -> named
	for _, n := range s.all() {
		if byNS[n.real.name] == nil {
			byNS[n.real.name] = map[string]string{}
		}
		byNS[n.real.name][n.namespace] = n.name
	}
	out := map[string]string{}
	for _, rc := range s.b.real {
		if byNS[rc.name] == nil {
			continue
		}
		list, err := rc.kube.AppsV1().Deployments("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			return nil, fmt.Errorf("listing Deployments %s in %s: %w", name, rc.name, err)
		}
		for _, d := range list.Items {
			if n, ok := byNS[rc.name][d.Namespace]; ok && len(d.Spec.Template.Spec.Containers) > 0 {
				out[n] = d.Spec.Template.Spec.Containers[0].Image
			}
		}
	}
	return out, nil
}

// rolloutOf is the id of flotilla's newest rollout of ref.
func (s *scenario) rolloutOf(ctx context.Context, ref string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/rollouts?limit=20", nil)
	if err != nil {
		return "", err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("listing rollouts: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("listing rollouts: %s", resp.Status)
	}
	var ros []rollout.Rollout
	if err := json.NewDecoder(resp.Body).Decode(&ros); err != nil {
		return "", fmt.Errorf("decoding rollouts: %w", err)
	}
	for _, ro := range ros {
		if ro.Ref() == ref {
			return ro.ID, nil
		}
	}
	return "", fmt.Errorf("no rollout of %s among flotilla's %d newest", ref, len(ros))
}

// verifyDeployed checks that every named cluster's Deployment and its
// Flagger-made primary run ref: the rollout went through every one.
func (s *scenario) verifyDeployed(ctx context.Context, ref string) error {
	for _, d := range []string{workload, workload + "-primary"} {
		images, err := s.images(ctx, d)
		if err != nil {
			return err
		}
		var wrong []string
		for _, n := range s.all() {
			if images[n.name] != ref {
				wrong = append(wrong, fmt.Sprintf("%s runs %q", n.name, images[n.name]))
			}
		}
		if len(wrong) > 0 {
			return fmt.Errorf("%d of %d clusters' %s do not run %s: %s", len(wrong), len(s.all()), d, ref, strings.Join(wrong, "; "))
		}
	}
	return nil
}

// The phases of -pod's report, in order.
const (
	phaseBefore = "idle before: pod Ready, no rollout yet"
	phaseFirst  = "rollout 1: creates the Canaries, Flagger initializes them"
	phaseLater  = "rollouts 2..N"
	phaseAfter  = "idle after the last rollout"
)

// runPod is -pod: flotilla from its image, installed by its chart on a
// real node of c1, rolls -runs versions out through the scenario's named
// clusters while the bench samples the pod's memory; it prints the
// report's rows (and writes every sample to -raw).
func runPod(ctx context.Context, o options, logger *slog.Logger) error {
	env := captureMachine()
	b, err := newBench(ctx, o, logger)
	if err != nil {
		return err
	}
	defer b.close() //nolint:contextcheck // teardown outlives the caller's ctx
	if err := b.confine(); err != nil {
		return err
	}
	if err := b.startPodNode(ctx); err != nil {
		return err
	}
	sc, err := b.newScenario(ctx, 0, o.wave2[0], 0, 0, 0)
	if err != nil {
		return fmt.Errorf("scenario wave2=%d: %w", o.wave2[0], err)
	}
	sc.runs = o.runs
	defer sc.close() //nolint:contextcheck // teardown outlives the caller's ctx
	rows, samples, failed, err := sc.sampleRollouts(ctx)
	if err != nil {
		return err
	}
	env.loadAfter = loadAvg()
	fmt.Print(podReport(o, env, sc, rows, o.podEvery, failed))
	if o.raw != "" {
		return writePodRaw(o.raw, samples)
	}
	return nil
}

// sampleRollouts samples the pod's memory idle for -pod-idle, during
// s.runs rollouts (the first creates the Canaries), and idle again; the
// clusters' Deployments and primaries are checked to run the last version.
func (s *scenario) sampleRollouts(ctx context.Context) ([]phaseRow, []memSample, int, error) {
	pod, err := s.pod.release.Pod(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	m := startMemSampler(ctx, s.b.o.podEvery, s.b.real[0].kube, s.b.pod.node.Name, pod.Namespace, pod.Name, s.pod.pid)
	took := map[string]time.Duration{}
	phase := func(name string, f func() error) error {
		m.setPhase(name)
		start := time.Now()
		err := f()
		took[name] += time.Since(start)
		return err
	}
	idle := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.b.o.podIdle):
			return nil
		}
	}
	err = phase(phaseBefore, idle)
	for i := 0; err == nil && i < s.runs; i++ {
		name := phaseLater
		if i == 0 {
			name = phaseFirst
		}
		err = phase(name, func() error {
			_, err := s.rollout(ctx, i == 0, false)
			if err == nil {
				s.log.Info("rollout done", "n", i+1, "version", s.deployed)
			}
			return err
		})
	}
	if err == nil {
		err = s.verifyDeployed(ctx, s.deployed)
	}
	if err == nil {
		err = phase(phaseAfter, idle)
	}
	samples, failed := m.stop()
	if err != nil {
		return nil, samples, failed, err
	}
	return phaseRows(samples, []string{phaseBefore, phaseFirst, phaseLater, phaseAfter}, took), samples, failed, nil
}
