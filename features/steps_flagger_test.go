package features

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/cucumber/godog"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerFlaggerSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a Deployment "([^"]*)" running image "([^"]*)"$`, s.deployment)
	sc.Step(`^a blue/green Canary for "([^"]*)" with (\d+) iterations every (\w+)$`, s.canary)
	sc.Step(`^a blue/green Canary for "([^"]*)" with (\d+) iterations every (\w+) and a "([^"]*)" gate$`, s.canaryWithGate)
	sc.Step(`^a blue/green Canary for "([^"]*)" with (\d+) iterations every (\w+) and an event webhook$`, s.canaryWithEventWebhook)
	sc.Step(`^the Canary "([^"]*)" reaches phase "([^"]*)"$`, s.canaryReaches)
	sc.Step(`^the Deployment "([^"]*)" is changed to image "([^"]*)"$`, s.setImage)
	sc.Step(`^the Deployment "([^"]*)" runs image "([^"]*)"$`, s.runsImage)
	sc.Step(`^a gate server answering (\d+)$`, s.gateServer)
	sc.Step(`^the gate server was called with the canary's name, namespace and phase "([^"]*)"$`, s.gateCalled)
	sc.Step(`^an event recorder$`, s.eventRecorder)
	sc.Step(`^the event recorder receives an event for "([^"]*)" with phase "([^"]*)" and a message containing "([^"]*)"$`, s.eventReceived)
	sc.Step(`^every recorded event carries the canary's name, namespace, phase and metadata\.eventMessage$`, s.eventsComplete)
}

func (s *scenario) deployment(ctx context.Context, name, image string) error {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: name, Image: image,
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
				}}},
			},
		},
	}
	_, err := s.cluster.Kube.AppsV1().Deployments(s.ns).Create(ctx, d, metav1.CreateOptions{})
	return err
}

func (s *scenario) createCanary(ctx context.Context, target string, iterations int, interval string, hooks ...flaggerv1.CanaryWebhook) error {
	c := &flaggerv1.Canary{
		ObjectMeta: metav1.ObjectMeta{Name: target, Namespace: s.ns},
		Spec: flaggerv1.CanarySpec{
			Provider:                "kubernetes",
			TargetRef:               flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			ProgressDeadlineSeconds: ptr.To[int32](120),
			Service:                 flaggerv1.CanaryService{Port: 9898},
			Analysis: &flaggerv1.CanaryAnalysis{
				Interval:   interval,
				Threshold:  1,
				Iterations: iterations,
				Webhooks:   hooks,
			},
		},
	}
	_, err := s.cluster.Flagger.FlaggerV1beta1().Canaries(s.ns).Create(ctx, c, metav1.CreateOptions{})
	return err
}

func (s *scenario) canary(ctx context.Context, target string, iterations int, interval string) error {
	return s.createCanary(ctx, target, iterations, interval)
}

func (s *scenario) canaryWithGate(ctx context.Context, target string, iterations int, interval, hookType string) error {
	if s.gate == nil {
		return fmt.Errorf("no gate server in this scenario")
	}
	return s.createCanary(ctx, target, iterations, interval, flaggerv1.CanaryWebhook{
		Type: flaggerv1.HookType(hookType), Name: "gate", URL: s.gate.srv.URL, Timeout: "5s",
	})
}

func (s *scenario) canaryWithEventWebhook(ctx context.Context, target string, iterations int, interval string) error {
	if s.recorder == nil {
		return fmt.Errorf("no event recorder in this scenario")
	}
	return s.createCanary(ctx, target, iterations, interval, flaggerv1.CanaryWebhook{
		Type: flaggerv1.EventHook, Name: "events", URL: s.recorder.srv.URL,
	})
}

func (s *scenario) canaryReaches(ctx context.Context, name, phase string) error {
	want := flaggerv1.CanaryPhase(phase)
	_, err := fleettest.Until(ctx, waitTimeout, s.cluster.Flagger.FlaggerV1beta1().RESTClient(), "canaries", s.ns, name,
		func(c *flaggerv1.Canary) (bool, error) {
			got := c.Status.Phase
			if got == want {
				return true, nil
			}
			if got == flaggerv1.CanaryPhaseFailed || (got == flaggerv1.CanaryPhaseSucceeded && want == flaggerv1.CanaryPhaseFailed) {
				return false, fmt.Errorf("canary ended %s, want %s", got, want)
			}
			return false, nil
		})
	return err
}

func (s *scenario) setImage(ctx context.Context, name, image string) error {
	deployments := s.cluster.Kube.AppsV1().Deployments(s.ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err = deployments.Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

func (s *scenario) runsImage(ctx context.Context, name, image string) error {
	d, err := s.cluster.Kube.AppsV1().Deployments(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
		return fmt.Errorf("deployment %s runs %s, want %s", name, got, image)
	}
	return nil
}

// gateServer answers every Flagger gate webhook with one status and records
// the payloads.
type gateServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []flaggerv1.CanaryWebhookPayload
}

func (s *scenario) gateServer(status int) error {
	g := &gateServer{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p flaggerv1.CanaryWebhookPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err == nil {
			g.mu.Lock()
			g.calls = append(g.calls, p)
			g.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	s.gate = g
	s.onCleanup(g.srv.Close)
	return nil
}

func (s *scenario) gateCalled(phase string) error {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	for _, c := range s.gate.calls {
		if c.Name == "podinfo" && c.Namespace == s.ns && string(c.Phase) == phase && c.Checksum != "" {
			return nil
		}
	}
	return fmt.Errorf("no gate call for podinfo.%s in phase %s among %d calls: %+v", s.ns, phase, len(s.gate.calls), s.gate.calls)
}

// eventRecorder records the raw bodies of Flagger's event webhooks.
type eventRecorder struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  []map[string]any
	changed chan struct{}
}

func (s *scenario) eventRecorder() error {
	e := &eventRecorder{changed: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		var m map[string]any
		if err != nil || json.Unmarshal(b, &m) != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.bodies = append(e.bodies, m)
		close(e.changed)
		e.changed = make(chan struct{})
		e.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	s.recorder = e
	s.onCleanup(e.srv.Close)
	return nil
}

func (s *scenario) eventReceived(ctx context.Context, name, phase, message string) error {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	e := s.recorder
	for {
		e.mu.Lock()
		for _, b := range e.bodies {
			md, _ := b["metadata"].(map[string]any)
			msg, _ := md["eventMessage"].(string)
			if b["name"] == name && b["namespace"] == s.ns && b["phase"] == phase && strings.Contains(msg, message) {
				e.mu.Unlock()
				return nil
			}
		}
		changed, n := e.changed, len(e.bodies)
		e.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("no event for %s in phase %s with %q among %d received: %w", name, phase, message, n, ctx.Err())
		}
	}
}

func (s *scenario) eventsComplete() error {
	s.recorder.mu.Lock()
	defer s.recorder.mu.Unlock()
	if len(s.recorder.bodies) == 0 {
		return fmt.Errorf("no events recorded")
	}
	for i, b := range s.recorder.bodies {
		md, _ := b["metadata"].(map[string]any)
		for _, v := range []any{b["name"], b["namespace"], b["phase"], md["eventMessage"]} {
			if str, ok := v.(string); !ok || str == "" {
				return fmt.Errorf("event %d lacks name, namespace, phase or metadata.eventMessage: %v", i, b)
			}
		}
		if b["namespace"] != s.ns {
			return fmt.Errorf("event %d is for namespace %v, want %s", i, b["namespace"], s.ns)
		}
	}
	return nil
}
