package features

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerTektonExecutorSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla's pipelines are installed in a fresh namespace of cluster "([^"]*)"$`, s.pipelinesInstalled)
	sc.Step(`^flotilla runs its rollout pipelines there on Tekton, labelled "([^"]*)"$`, s.runsOnTekton)
	sc.Step(`^that namespace holds a succeeded PipelineRun of the rollout of "([^"]*)" for every cluster, its pods labelled alike$`, s.pipelineRunsOfRollout)
}

// tektonExecutor is where a scenario's flotilla runs its pipelines with
// executor tekton: a namespace of a fleet cluster, where host steps run
// the steps of the pods labelled simfail=on-host (kwok runs no
// containers; see fleettest.HostSteps).
type tektonExecutor struct {
	cluster   *fleettest.Clients
	namespace string
	labels    map[string]string // fleet.tekton.labels; nil until runsOnTekton
	steps     *fleettest.HostSteps
}

// config is fleet.tekton.
func (t *tektonExecutor) config() map[string]any {
	return map[string]any{"cluster": t.cluster.Name, "namespace": t.namespace, "labels": t.labels}
}

// pipelinesInstalled installs the Tasks and Pipeline with `flotilla
// pipelines install`, as an operator would, and runs the steps of the
// namespace's on-host pods.
func (s *scenario) pipelinesInstalled(ctx context.Context, cluster string) error {
	cl, ok := fleet.Cluster(cluster)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	ns, err := c.CreateNamespace(ctx, "tekton")
	if err != nil {
		return fmt.Errorf("creating namespace in %s: %w", cluster, err)
	}
	s.onCleanup(func() {
		// Runs in the After hook, when the step's ctx may have ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	out, err := exec.CommandContext(ctx, flotillaBin, "pipelines", "install", "--kubeconfig", cl.Kubeconfig, "--namespace", ns).CombinedOutput()
	if err != nil {
		return fmt.Errorf("flotilla pipelines install: %w\n%s", err, out)
	}
	if want := "Pipeline " + ns + "/" + pipelines.PipelineName + " applied"; !strings.Contains(string(out), want) {
		return fmt.Errorf("flotilla pipelines install printed %q, want %q", out, want)
	}
	t := &tektonExecutor{cluster: c, namespace: ns}
	// The steps outlive this step; the scenario's cleanup stops them.
	t.steps = fleettest.StartHostSteps(context.WithoutCancel(ctx), c.Kube, ns, flotillaBin, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "host steps in %s/%s: %s\n", cluster, ns, fmt.Sprintf(format, args...))
	})
	s.onCleanup(func() {
		t.steps.Stop()
		if s.failed {
			fmt.Fprintf(os.Stderr, "--- steps run on the host for %s/%s:\n%s\n", cluster, ns, t.steps.Log())
		}
	})
	s.w.tekton = t
	return nil
}

// runsOnTekton has the flotilla the scenario starts run its pipelines in
// the namespace the pipelines were installed in (fleet.executor tekton),
// its PipelineRuns labelled with label.
func (s *scenario) runsOnTekton(label string) error {
	if s.w.tekton == nil {
		return fmt.Errorf("no pipelines installed yet")
	}
	k, v, ok := strings.Cut(label, "=")
	if !ok {
		return fmt.Errorf("label %q is not k=v", label)
	}
	s.w.tekton.labels = map[string]string{k: v}
	return nil
}

// pipelineRunsOfRollout finds the rollout's PipelineRuns by the label
// flotilla puts on them and checks that one succeeded for every cluster of
// the waves, and that the labels of fleet.tekton reached the runs and,
// through Tekton, their TaskRuns' pods.
func (s *scenario) pipelineRunsOfRollout(ctx context.Context, version string) error {
	t := s.w.tekton
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	runs, err := t.cluster.Tekton.TektonV1().PipelineRuns(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=" + id})
	if err != nil {
		return fmt.Errorf("listing PipelineRuns of %s: %w", id, err)
	}
	var seen []string
	succeeded := map[string]bool{}
	for _, pr := range runs.Items {
		cluster := pr.Labels[pipelines.LabelCluster]
		ok := pr.Status.GetCondition(apis.ConditionSucceeded).IsTrue()
		seen = append(seen, fmt.Sprintf("%s (cluster %s, succeeded %t)", pr.Name, cluster, ok))
		if !ok {
			continue // an attempt that failed may precede the one that succeeded
		}
		if err := hasLabels("PipelineRun "+pr.Name, pr.Labels, t.labels); err != nil {
			return err
		}
		pods, err := t.cluster.Kube.CoreV1().Pods(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipeline.PipelineRunLabelKey + "=" + pr.Name})
		if err != nil {
			return fmt.Errorf("listing the pods of %s: %w", pr.Name, err)
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("PipelineRun %s has no pods", pr.Name)
		}
		for _, p := range pods.Items {
			if err := hasLabels("pod "+p.Name, p.Labels, t.labels); err != nil {
				return err
			}
		}
		succeeded[cluster] = true
	}
	for _, names := range s.w.waves {
		for _, cluster := range names {
			if !succeeded[cluster] {
				return fmt.Errorf("no succeeded PipelineRun of rollout %s for cluster %s in %s/%s; found %v",
					id, cluster, t.cluster.Name, t.namespace, seen)
			}
		}
	}
	return nil
}

func hasLabels(what string, got, want map[string]string) error {
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s is labelled %v, want %s=%s among them", what, got, k, v)
		}
	}
	return nil
}
