package features

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/cucumber/godog"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerValidationSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application will be validated manually$`, s.validatedManually)
	sc.Step(`^the application will be validated by watching for the pod label "([^"]*)"$`, s.validatedByLabel)
	sc.Step(`^the canary in cluster "([^"]*)" waits for promotion$`, s.canaryWaitsForPromotion)
	sc.Step("^the rollout of \"([^\"]*)\" is approved with `flotilla approve`$", s.approveRollout)
	sc.Step(`^the canary's pods in cluster "([^"]*)" get the label "([^"]*)"$`, s.labelCanaryPods)
}

func (s *scenario) validatedManually() error {
	s.w.validation = map[string]any{"items": []map[string]any{{"manual": map[string]any{"statusAfterDeadline": "none"}}}}
	return nil
}

func (s *scenario) validatedByLabel(label string) error {
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q is not k=v", label)
	}
	s.w.validation = map[string]any{
		// Long enough that the test, not the period, ends the wait.
		"validationPeriod": "10m",
		"items":            []map[string]any{{"labelWatch": map[string]any{"podInvalidationLabels": map[string]string{k: v}}}},
	}
	return nil
}

func (s *scenario) waveCluster(name string) (*fleettest.Clients, error) {
	for _, c := range s.w.clusters {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("cluster %s is in no wave of the scenario", name)
}

// canaryWaitsForPromotion waits for Flagger to hold the canary at flotilla's
// confirm-promotion gate.
func (s *scenario) canaryWaitsForPromotion(ctx context.Context, cluster string) error {
	c, err := s.waveCluster(cluster)
	if err != nil {
		return err
	}
	_, err = fleettest.Until(ctx, waitTimeout, c.Flagger.FlaggerV1beta1().RESTClient(), "canaries", s.w.namespace, s.w.workload,
		func(cd *flaggerv1.Canary) (bool, error) {
			if cd.Status.Phase == flaggerv1.CanaryPhaseFailed {
				return false, fmt.Errorf("canary failed while waiting for promotion: %+v", cd.Status.Conditions)
			}
			return cd.Status.Phase == flaggerv1.CanaryPhaseWaitingPromotion, nil
		})
	return err
}

func (s *scenario) approveRollout(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, err := s.flotillaCLI(ctx, "approve", id, "--token", s.w.apiToken, "--reason", "looks good")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "approved for every cluster") {
		return fmt.Errorf("flotilla approve printed %q", out)
	}
	return nil
}

// labelCanaryPods labels the pods of the canary Deployment (the workload
// itself; the primary's pods belong to <workload>-primary), as an alerting
// system would.
func (s *scenario) labelCanaryPods(ctx context.Context, cluster, label string) error {
	c, err := s.waveCluster(cluster)
	if err != nil {
		return err
	}
	k, v, _ := strings.Cut(label, "=")
	d, err := c.Kube.AppsV1().Deployments(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return err
	}
	pods, err := c.Kube.CoreV1().Pods(s.w.namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("no canary pods of %s in %s", s.w.workload, cluster)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{k: v}}})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if _, err := c.Kube.CoreV1().Pods(s.w.namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}
