package features

import (
	"context"
	"fmt"
	"time"

	"github.com/cucumber/godog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// scenario is the state of one running scenario.
type scenario struct {
	cluster  *fleettest.Clients
	ns       string
	cleanups []func()

	gate     *gateServer
	recorder *eventRecorder
	w        *world
	task     *taskRun
	failed   bool
	// scaleOut runs the scenario's flotilla in scale-out mode: three
	// replicas on the package's NATS cluster (the scale-out suite).
	scaleOut bool

	// checkOut and checkCode are the output and exit code of the last
	// `flotilla config check` a step ran.
	checkOut  string
	checkCode int
}

func (s *scenario) onCleanup(f func()) { s.cleanups = append(s.cleanups, f) }

// exclusive is a resource scenarios take one at a time (a shared Gitea,
// a cluster-scoped object).
type exclusive chan struct{}

func newExclusive() exclusive { return make(exclusive, 1) }

// exclusiveWait bounds the wait for an exclusive: every scenario that holds
// one has its own step deadlines, so a longer wait means one is stuck.
const exclusiveWait = 30 * time.Minute

// take holds e for the rest of the scenario (its cleanup releases it).
func (s *scenario) take(ctx context.Context, e exclusive, what string) error {
	select {
	case e <- struct{}{}:
		s.onCleanup(func() { <-e })
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(exclusiveWait):
		return fmt.Errorf("waited %s for %s, which another scenario holds", exclusiveWait, what)
	}
}

func (s *scenario) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// waitTimeout bounds every wait of a step. Flagger's stock build needs about a
// minute for a failed analysis; the slack is for a loaded 2-core machine,
// where make test's scenarios side by side (real API servers, Flagger,
// Tekton, Gitea) slow each other: at 3 minutes, runs at a load of 25 ran
// out on slow but progressing Tekton runs and Gitea merges.
const waitTimeout = 5 * time.Minute

func (s *scenario) registerClusterSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a fresh namespace in cluster "([^"]*)"$`, s.freshNamespace)
	sc.Step(`^a ConfigMap "([^"]*)" is created in that namespace of cluster "([^"]*)"$`, s.createConfigMap)
	sc.Step(`^the ConfigMap "([^"]*)" exists in that namespace of cluster "([^"]*)"$`, s.configMapExists)
	sc.Step(`^the ConfigMap "([^"]*)" is absent from that namespace of cluster "([^"]*)"$`, s.configMapAbsent)
	sc.Step(`^the namespace is absent from cluster "([^"]*)"$`, s.namespaceAbsent)
}

func (s *scenario) freshNamespace(ctx context.Context, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	ns, err := c.CreateNamespace(ctx, "feat")
	if err != nil {
		return fmt.Errorf("creating namespace: %w", err)
	}
	s.cluster, s.ns = c, ns
	s.onCleanup(func() {
		// Runs in the After hook, when the step's ctx may have ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	return nil
}

func (s *scenario) createConfigMap(ctx context.Context, name, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns}, Data: map[string]string{"cluster": cluster}}
	_, err = c.Kube.CoreV1().ConfigMaps(s.ns).Create(ctx, cm, metav1.CreateOptions{})
	return err
}

func (s *scenario) configMapExists(ctx context.Context, name, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cm.Data["cluster"] != cluster {
		return fmt.Errorf("ConfigMap %s says cluster %q, want %q", name, cm.Data["cluster"], cluster)
	}
	return nil
}

func (s *scenario) configMapAbsent(ctx context.Context, name, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().ConfigMaps(s.ns).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return fmt.Errorf("ConfigMap %s/%s in %s: want NotFound, but it exists", s.ns, name, cluster)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("ConfigMap %s/%s in %s: want NotFound, got %w", s.ns, name, cluster, err)
	}
	return nil
}

func (s *scenario) namespaceAbsent(ctx context.Context, cluster string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().Namespaces().Get(ctx, s.ns, metav1.GetOptions{})
	if err == nil {
		return fmt.Errorf("namespace %s in %s: want NotFound, but it exists", s.ns, cluster)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %s in %s: want NotFound, got %w", s.ns, cluster, err)
	}
	return nil
}
