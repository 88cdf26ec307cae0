package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Background rollouts: with -inflight N, the scenario's flotilla also
// serves -inflight other applications, and before the measured runs one
// rollout of each starts (an application has one rollout in flight: a
// newer version supersedes it) and stay in flight in wave 1 (their canaries' analysis
// takes hours), so that the runs are measured next to them.

func bgApp(i int) string { return fmt.Sprintf("bg-%02d", i+1) }

func (s *scenario) backgroundApps() []map[string]any {
	if s.inflight == 0 {
		return nil
	}
	var out []map[string]any
	for i := range s.inflight {
		out = append(out, map[string]any{
			"name": bgApp(i), "image": s.b.regHost + "/bench/" + bgApp(i), "track": "MajorVersion", "namespace": s.ns,
			"workload": map[string]any{"kind": "Deployment", "name": bgApp(i)},
			"service":  map[string]any{"port": 9898},
			"delivery": map[string]any{
				"strategy": "blueGreen", "interval": "1m", "iterations": 500, "threshold": 1, "progressDeadline": "1h",
			},
		})
	}
	return out
}

// createBackgroundWorkloads makes the other applications' Deployments in
// wave 1's clusters (their rollouts never leave wave 1).
func (s *scenario) createBackgroundWorkloads(ctx context.Context) error {
	if s.inflight == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, n := range s.wave1 {
		for i := range s.inflight {
			g.Go(func() error {
				name := bgApp(i)
				labels := map[string]string{"app": name}
				d := &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.namespace, Labels: labels},
					Spec: appsv1.DeploymentSpec{
						Replicas: ptr.To[int32](1),
						Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{Labels: labels},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{
								Name: name, Image: s.b.regHost + "/bench/" + name + ":0.1.0",
								Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
							}}},
						},
					},
				}
				if _, err := n.real.kube.AppsV1().Deployments(n.namespace).Create(gctx, d, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating %s in %s: %w", name, n.name, err)
				}
				// Flagger initializes a new canary at once, without an
				// analysis: the rollouts held in flight must find theirs
				// initialized, else the first would pass wave 1.
				c := &flaggerv1.Canary{
					ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.namespace},
					Spec: flaggerv1.CanarySpec{
						Provider:  "kubernetes",
						TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
						Service:   flaggerv1.CanaryService{Port: 9898},
						Analysis:  &flaggerv1.CanaryAnalysis{Interval: "1m", Threshold: 1, Iterations: 500},
					},
				}
				if _, err := n.real.flagger.FlaggerV1beta1().Canaries(n.namespace).Create(gctx, c, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("creating the canary of %s in %s: %w", name, n.name, err)
				}
				return s.until(gctx, 5*time.Minute, "Flagger to initialize "+name+" in "+n.name, func() (bool, error) {
					c, err := n.real.flagger.FlaggerV1beta1().Canaries(n.namespace).Get(gctx, name, metav1.GetOptions{})
					if err != nil || c.Status.Phase != flaggerv1.CanaryPhaseInitialized {
						return false, nil //nolint:nilerr // not there yet
					}
					_, err = n.real.kube.AppsV1().Deployments(n.namespace).Get(gctx, name+"-primary", metav1.GetOptions{})
					return err == nil, nil
				})
			})
		}
	}
	return g.Wait()
}

// background starts the rollouts held in flight and waits until each has
// applied wave 1.
func (s *scenario) background(ctx context.Context, res *scenarioResult) error {
	h := http.Header{}
	h.Set("Content-Type", "application/vnd.docker.distribution.events.v2+json")
	h.Set("Authorization", "Bearer "+s.regToken)
	for i := range s.inflight {
		_, body, err := s.pushRepo("bench/"+bgApp(i), "1.0.0")
		if err != nil {
			return err
		}
		if err := s.post(ctx, "/hooks/registry", h, body); err != nil {
			return err
		}
	}
	err := s.until(ctx, 5*time.Minute, fmt.Sprintf("%d rollouts to apply wave 1", s.inflight), func() (bool, error) {
		n, err := s.backgroundApplied(ctx)
		return n >= s.inflight, err
	})
	if err != nil {
		return err
	}
	res.inflight, res.apps = s.inflight, s.inflight
	res.rssStart = selfRSS()
	s.log.Info("rollouts held in flight", "rollouts", s.inflight, "apps", s.inflight, "rss_mib", mib(res.rssStart))
	return nil
}

// backgroundApplied counts the other applications' rollouts in flight whose
// wave 1 is applied.
func (s *scenario) backgroundApplied(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/api/v1/rollouts?limit=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var ros []rollout.Rollout
	if err := json.NewDecoder(resp.Body).Decode(&ros); err != nil {
		return 0, err
	}
	n := 0
	for _, ro := range ros {
		if !strings.HasPrefix(ro.Application, "bg-") {
			continue
		}
		if ro.Phase != rollout.Progressing {
			return 0, fmt.Errorf("background rollout %s is %s: %s", ro.ID, ro.Phase, ro.Reason)
		}
		applied := true
		for _, c := range ro.Waves[0].Clusters {
			applied = applied && c.Phase == rollout.ClusterProgressing
		}
		if applied {
			n++
		}
	}
	return n, nil
}

// stillInFlight checks that the background rollouts stayed in flight.
func (s *scenario) stillInFlight(ctx context.Context) error {
	n, err := s.backgroundApplied(ctx)
	if err != nil {
		return err
	}
	if n < s.inflight {
		return fmt.Errorf("only %d of %d background rollouts are still in flight", n, s.inflight)
	}
	return nil
}

// selfRSS is this process's resident set size in bytes.
func selfRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// heapInUse is the Go heap in use of this process.
func heapInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
