package features

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"

	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerTektonExecutorSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla's pipelines are installed in a fresh namespace of cluster "([^"]*)"$`, s.pipelinesInstalled)
	sc.Step(`^flotilla runs its rollout pipelines there on Tekton, labelled "([^"]*)"$`, s.runsOnTekton)
	sc.Step(`^that namespace holds a succeeded PipelineRun of the rollout of "([^"]*)" for every cluster, its pods labelled alike$`, s.pipelineRunsOfRollout)
	sc.Step(`^every cluster's succeeded PipelineRun of that commit carries the members "([^"]*)" in order$`, s.pipelineRunsCarryMembers)
	sc.Step(`^every cluster's succeeded PipelineRun of the rollout of "([^"]*)" carries the members "([^"]*)" by digest, and says they ran "([^"]*)" before$`, s.pipelineRunsCarryImageMembers)
	sc.Step(`^flotilla's pipelines are installed in a fresh namespace of cluster "([^"]*)", their steps in flotilla's image on the real node$`, s.pipelinesOnRealNode)
	sc.Step(`^every step of the rollout of "([^"]*)" ran on the real node in a container of flotilla's image by digest, and exited 0$`, s.stepsRanOnRealNode)
}

// tektonExecutor is where a scenario's flotilla runs its pipelines with
// executor tekton: a namespace of a fleet cluster, where host steps run
// the steps of the pods labelled simfail=on-host (kwok runs no
// containers; see fleettest.HostSteps).
type tektonExecutor struct {
	cluster   *fleettest.Clients
	namespace string
	labels    map[string]string // fleet.tekton.labels; nil until runsOnTekton
	// podTemplate is fleet.tekton.podTemplate; nil for none.
	podTemplate map[string]any
	// steps runs the on-host pods' steps; nil when a real node runs them.
	steps *fleettest.HostSteps
	// image is the image the steps run, by digest, when a real node
	// runs them.
	image string
}

// config is fleet.tekton.
func (t *tektonExecutor) config() map[string]any {
	c := map[string]any{"cluster": t.cluster.Name, "namespace": t.namespace, "labels": t.labels}
	if t.podTemplate != nil {
		c["podTemplate"] = t.podTemplate
	}
	return c
}

// pipelinesInstalled installs the Tasks and Pipeline with `flotilla
// pipelines install`, as an operator would, and runs the steps of the
// namespace's on-host pods.
func (s *scenario) pipelinesInstalled(ctx context.Context, cluster string) error {
	t, err := s.installPipelines(ctx, cluster, "")
	if err != nil {
		return err
	}
	c := t.cluster
	ns := t.namespace
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
	return nil
}

// installPipelines runs `flotilla pipelines install` (its steps in image,
// or the default) into a fresh namespace of the cluster, which becomes the
// scenario's Tekton executor.
func (s *scenario) installPipelines(ctx context.Context, cluster, image string) (*tektonExecutor, error) {
	cl, ok := fleet.Cluster(cluster)
	if !ok {
		return nil, fmt.Errorf("the fleet has no cluster %s", cluster)
	}
	c, err := clientsFor(cluster)
	if err != nil {
		return nil, err
	}
	ns, err := c.CreateNamespace(ctx, "tekton")
	if err != nil {
		return nil, fmt.Errorf("creating namespace in %s: %w", cluster, err)
	}
	s.onCleanup(func() {
		// Runs in the After hook, when the step's ctx may have ended.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.Kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	args := []string{"pipelines", "install", "--kubeconfig", cl.Kubeconfig, "--namespace", ns}
	if image != "" {
		args = append(args, "--image", image)
	}
	out, err := exec.CommandContext(ctx, flotillaBin, args...).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("flotilla pipelines install: %w\n%s", err, out)
	}
	if want := "Pipeline " + ns + "/" + pipelines.PipelineName + " applied"; !strings.Contains(string(out), want) {
		return nil, fmt.Errorf("flotilla pipelines install printed %q, want %q", out, want)
	}
	t := &tektonExecutor{cluster: c, namespace: ns, image: image}
	s.w.tekton = t
	return t, nil
}

// pipelinesOnRealNode installs the pipelines with their steps in
// flotilla's image (by digest, from the real node's registry), and has
// the executor put the TaskRuns' pods on the real node through
// fleet.tekton.podTemplate: there containerd and runc run Tekton's
// entrypoint and then each step, no host steps.
func (s *scenario) pipelinesOnRealNode(ctx context.Context, cluster string) error {
	node := s.w.realNode
	if node == nil || node.Cluster != cluster {
		return fmt.Errorf("no real node in cluster %s: a step starting one must come first", cluster)
	}
	image, err := s.flotillaImage(ctx)
	if err != nil {
		return err
	}
	t, err := s.installPipelines(ctx, cluster, image)
	if err != nil {
		return err
	}
	t.podTemplate = map[string]any{
		"nodeSelector": map[string]any{localfleet.RealNodeLabel: "true"},
		"tolerations": []any{map[string]any{
			"key": localfleet.RealNodeTaint, "operator": "Exists", "effect": "NoSchedule",
		}},
	}
	return nil
}

// stepsRanOnRealNode reads, from the pods of the rollout's PipelineRuns as
// the real node's kubelet reported them, that each ran there: Tekton's
// entrypoint image in the "prepare" init container, then every step in
// flotilla's image, pulled by its digest, terminated with exit code 0.
func (s *scenario) stepsRanOnRealNode(ctx context.Context, version string) error {
	t, node := s.w.tekton, s.w.realNode
	if t == nil || t.image == "" || node == nil {
		return errors.New("no pipelines on a real node: a step installing them must come first")
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	pods, err := t.cluster.Kube.CoreV1().Pods(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=" + pipelines.LabelValue(id)})
	if err != nil {
		return fmt.Errorf("listing the pods of rollout %s: %w", id, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("rollout %s has no pods in %s/%s", id, t.cluster.Name, t.namespace)
	}
	_, digest, _ := strings.Cut(t.image, "@")
	steps := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != node.Name {
			return fmt.Errorf("pod %s ran on node %q, not the real node %s", p.Name, p.Spec.NodeName, node.Name)
		}
		for _, c := range p.Status.InitContainerStatuses {
			if c.Name == "prepare" && c.Image != localfleet.TektonImage("entrypoint") {
				return fmt.Errorf("pod %s: Tekton's entrypoint ran from %s, want %s", p.Name, c.Image, localfleet.TektonImage("entrypoint"))
			}
			if err := exitedZero(p.Name, c); err != nil {
				return err
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			if !strings.HasPrefix(c.Name, "step-") {
				continue
			}
			if !strings.HasSuffix(c.ImageID, "@"+digest) {
				return fmt.Errorf("pod %s: step %s ran image %s (%s), want flotilla's %s", p.Name, c.Name, c.Image, c.ImageID, t.image)
			}
			if err := exitedZero(p.Name, c); err != nil {
				return err
			}
			steps++
		}
	}
	if steps == 0 {
		return fmt.Errorf("the pods of rollout %s report no step containers", id)
	}
	return nil
}

// exitedZero checks that the kubelet saw the container terminate with
// exit code 0.
func exitedZero(pod string, c corev1.ContainerStatus) error {
	if c.State.Terminated == nil {
		return fmt.Errorf("pod %s: container %s has not terminated: %+v", pod, c.Name, c.State)
	}
	if tm := c.State.Terminated; tm.ExitCode != 0 {
		return fmt.Errorf("pod %s: container %s exited %d (%s): %s", pod, c.Name, tm.ExitCode, tm.Reason, tm.Message)
	}
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
//
// Read for up to a minute: a run ends a poll after its cluster's canary
// promoted, which may end the rollout first (CI saw c2's run still going
// when the rollout had succeeded).
func (s *scenario) pipelineRunsOfRollout(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	return forAMinute(ctx, func() error { return s.rolloutsRunsSucceeded(ctx, id) })
}

// rolloutsRunsSucceeded checks once that every cluster of the waves has a
// succeeded PipelineRun of rollout id, it and its pods labelled.
func (s *scenario) rolloutsRunsSucceeded(ctx context.Context, id string) error {
	t := s.w.tekton
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

// pipelineRunsCarryMembers reads the PipelineRuns of the rollout of that
// commit, for up to a minute (a set's run ends a poll after the cluster's
// last canary promoted, which may end the rollout first): each cluster's
// succeeded one has the members param, the set's members in order.
func (s *scenario) pipelineRunsCarryMembers(ctx context.Context, members string) error {
	id, err := s.rolloutID(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return err
	}
	return forAMinute(ctx, func() error { return s.runsCarryMembers(ctx, id, strings.Split(members, ",")) })
}

func (s *scenario) runsCarryMembers(ctx context.Context, id string, want []string) error {
	t := s.w.tekton
	runs, err := t.cluster.Tekton.TektonV1().PipelineRuns(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=" + id})
	if err != nil {
		return fmt.Errorf("listing PipelineRuns of %s: %w", id, err)
	}
	done := map[string]bool{}
	for _, pr := range runs.Items {
		if !pr.Status.GetCondition(apis.ConditionSucceeded).IsTrue() {
			continue
		}
		var got []string
		for _, p := range pr.Spec.Params {
			if p.Name != tasks.ParamMembers {
				continue
			}
			var ms []tasks.SetMember
			if err := json.Unmarshal([]byte(p.Value.StringVal), &ms); err != nil {
				return fmt.Errorf("PipelineRun %s: param members: %w", pr.Name, err)
			}
			for _, m := range ms {
				got = append(got, m.Application)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("PipelineRun %s's members (-want +got):\n%s", pr.Name, d)
		}
		done[pr.Labels[pipelines.LabelCluster]] = true
	}
	for _, c := range s.w.clusters {
		if !done[c.Name] {
			return fmt.Errorf("no succeeded PipelineRun of rollout %s for cluster %s", id, c.Name)
		}
	}
	return nil
}

// pipelineRunsCarryImageMembers reads the PipelineRuns of the rollout of
// a release set of image members' tuple (its tag), for up to a minute (as
// pipelineRunsCarryMembers): each cluster's succeeded one has the members
// param, the members in order each with its image pinned at the version's
// digest ("web-api:1.1.0,web-frontend:2.0.0"), and its previous-members
// result, what each member's primary ran before, by digest too.
func (s *scenario) pipelineRunsCarryImageMembers(ctx context.Context, tuple, members, before string) error {
	id, err := s.rolloutID(ctx, tuple)
	if err != nil {
		return err
	}
	var want []tasks.SetMember
	for _, mv := range strings.Split(members, ",") {
		app, version, _ := strings.Cut(mv, ":")
		ref, err := s.refOf(app, version)
		if err != nil {
			return err
		}
		want = append(want, tasks.SetMember{Application: app, Image: ref})
	}
	wantBefore := map[string]string{}
	for _, mv := range strings.Split(before, ",") {
		app, version, _ := strings.Cut(mv, ":")
		if wantBefore[app], err = s.refOf(app, version); err != nil {
			return err
		}
	}
	return forAMinute(ctx, func() error { return s.runsCarryImageMembers(ctx, id, want, wantBefore) })
}

// refOf is application app's version by digest in the registry.
func (s *scenario) refOf(app, version string) (ref string, err error) {
	err = s.withRepo(app, func() error {
		ref, err = s.ref(version)
		return err
	})
	return ref, err
}

func (s *scenario) runsCarryImageMembers(ctx context.Context, id string, want []tasks.SetMember, wantBefore map[string]string) error {
	t := s.w.tekton
	runs, err := t.cluster.Tekton.TektonV1().PipelineRuns(t.namespace).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=" + pipelines.LabelValue(id)})
	if err != nil {
		return fmt.Errorf("listing PipelineRuns of %s: %w", id, err)
	}
	done := map[string]bool{}
	for _, pr := range runs.Items {
		if !pr.Status.GetCondition(apis.ConditionSucceeded).IsTrue() {
			continue
		}
		var got []tasks.SetMember
		for _, p := range pr.Spec.Params {
			if p.Name != tasks.ParamMembers {
				continue
			}
			var ms []tasks.SetMember
			if err := json.Unmarshal([]byte(p.Value.StringVal), &ms); err != nil {
				return fmt.Errorf("PipelineRun %s: param members: %w", pr.Name, err)
			}
			for _, m := range ms {
				got = append(got, tasks.SetMember{Application: m.Application, Image: m.Image})
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			return fmt.Errorf("PipelineRun %s's members (-want +got):\n%s", pr.Name, d)
		}
		var before map[string]string
		for _, r := range pr.Status.Results {
			if r.Name == pipelines.ResultPreviousMembers {
				if err := json.Unmarshal([]byte(r.Value.StringVal), &before); err != nil {
					return fmt.Errorf("PipelineRun %s: result %s = %q: %w", pr.Name, r.Name, r.Value.StringVal, err)
				}
			}
		}
		if d := cmp.Diff(wantBefore, before); d != "" {
			return fmt.Errorf("PipelineRun %s's result %s, what the members ran before (-want +got):\n%s", pr.Name, pipelines.ResultPreviousMembers, d)
		}
		done[pr.Labels[pipelines.LabelCluster]] = true
	}
	for _, c := range s.w.clusters {
		if !done[c.Name] {
			return fmt.Errorf("no succeeded PipelineRun of rollout %s for cluster %s in %s/%s", id, c.Name, t.cluster.Name, t.namespace)
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

// forAMinute checks until check passes, every second for up to a minute
// (or ctx's end), and returns its last error: a PipelineRun ends a poll
// after its cluster's canary promoted, which may end the rollout first.
func forAMinute(ctx context.Context, check func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
