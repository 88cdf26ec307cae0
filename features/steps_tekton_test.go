package features

import (
	"context"
	"fmt"

	"github.com/cucumber/godog"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"knative.dev/pkg/apis"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

func (s *scenario) registerTektonSteps(sc *godog.ScenarioContext) {
	sc.Step(`^a PipelineRun "([^"]*)" runs task "([^"]*)" and then task "([^"]*)"$`, s.pipelineRun)
	sc.Step(`^a PipelineRun "([^"]*)" runs task "([^"]*)" and then task "([^"]*)", and the pod of "([^"]*)" fails$`, s.failingPipelineRun)
	sc.Step(`^the PipelineRun "([^"]*)" ends "([^"]*)"$`, s.pipelineRunEnds)
	sc.Step(`^its TaskRuns "([^"]*)" and "([^"]*)" ended "([^"]*)", "([^"]*)" after "([^"]*)"$`, s.taskRunsEnded)
	sc.Step(`^its TaskRun "([^"]*)" never ran$`, s.taskNeverRan)
}

// task is an inline task of one step. kwok plays the kubelet, so the step's
// command is never run; the label simfail: "true" makes kwok fail the pod.
func task(name string, runAfter []string, fail bool) tektonv1.PipelineTask {
	md := tektonv1.PipelineTaskMetadata{Labels: map[string]string{"flotilla.test/task": name}}
	if fail {
		md.Labels["simfail"] = "true"
	}
	return tektonv1.PipelineTask{
		Name:     name,
		RunAfter: runAfter,
		TaskSpec: &tektonv1.EmbeddedTask{
			Metadata: md,
			TaskSpec: tektonv1.TaskSpec{Steps: []tektonv1.Step{{
				Name:    "run",
				Image:   "registry.local/busybox:1.36",
				Command: []string{"sh", "-c", "echo " + name},
			}}},
		},
	}
}

func (s *scenario) createPipelineRun(ctx context.Context, name string, tasks ...tektonv1.PipelineTask) error {
	pr := &tektonv1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
		Spec:       tektonv1.PipelineRunSpec{PipelineSpec: &tektonv1.PipelineSpec{Tasks: tasks}},
	}
	_, err := s.cluster.Tekton.TektonV1().PipelineRuns(s.ns).Create(ctx, pr, metav1.CreateOptions{})
	return err
}

func (s *scenario) pipelineRun(ctx context.Context, name, first, second string) error {
	return s.createPipelineRun(ctx, name, task(first, nil, false), task(second, []string{first}, false))
}

func (s *scenario) failingPipelineRun(ctx context.Context, name, first, second, failing string) error {
	return s.createPipelineRun(ctx, name, task(first, nil, failing == first), task(second, []string{first}, failing == second))
}

func (s *scenario) pipelineRunEnds(ctx context.Context, name, want string) error {
	pr, err := fleettest.Until(ctx, waitTimeout, s.cluster.Tekton.TektonV1().RESTClient(), "pipelineruns", s.ns, name,
		func(pr *tektonv1.PipelineRun) (bool, error) { return pr.IsDone(), nil })
	if err != nil {
		return err
	}
	if got := succeeded(pr.Status.GetCondition(apis.ConditionSucceeded)); got != want {
		return fmt.Errorf("PipelineRun %s ended %s, want %s: %v", name, got, want, pr.Status.GetCondition(apis.ConditionSucceeded))
	}
	return nil
}

func succeeded(c *apis.Condition) string {
	switch {
	case c == nil:
		return "Unknown"
	case c.Status == corev1.ConditionTrue:
		return "Succeeded"
	case c.Status == corev1.ConditionFalse:
		return "Failed"
	default:
		return "Running"
	}
}

// taskRuns maps the pipeline task names of the scenario's PipelineRuns to their TaskRuns.
func (s *scenario) taskRuns(ctx context.Context) (map[string]tektonv1.TaskRun, error) {
	list, err := s.cluster.Tekton.TektonV1().TaskRuns(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]tektonv1.TaskRun{}
	for _, tr := range list.Items {
		out[tr.Labels["tekton.dev/pipelineTask"]] = tr
	}
	return out, nil
}

func (s *scenario) taskRunsEnded(ctx context.Context, a, b, want, later, earlier string) error {
	trs, err := s.taskRuns(ctx)
	if err != nil {
		return err
	}
	for _, name := range []string{a, b} {
		tr, ok := trs[name]
		if !ok {
			return fmt.Errorf("no TaskRun for task %s", name)
		}
		if got := succeeded(tr.Status.GetCondition(apis.ConditionSucceeded)); got != want {
			return fmt.Errorf("TaskRun of %s ended %s, want %s", name, got, want)
		}
	}
	l, e := trs[later].Status, trs[earlier].Status
	if l.StartTime == nil || e.CompletionTime == nil || l.StartTime.Before(e.CompletionTime) {
		return fmt.Errorf("task %s started at %v, before %s completed at %v", later, l.StartTime, earlier, e.CompletionTime)
	}
	return nil
}

func (s *scenario) taskNeverRan(ctx context.Context, name string) error {
	trs, err := s.taskRuns(ctx)
	if err != nil {
		return err
	}
	if tr, ok := trs[name]; ok {
		return fmt.Errorf("task %s ran as TaskRun %s", name, tr.Name)
	}
	return nil
}
