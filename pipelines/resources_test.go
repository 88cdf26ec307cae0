package pipelines_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/deploy/image"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// TestEmbeddedYAMLValid parses the embedded Tasks and Pipeline with Tekton's
// v1 types (strictly) and validates every object with Tekton's own Validate,
// after its own SetDefaults, as its admission webhook would.
func TestEmbeddedYAMLValid(t *testing.T) {
	res, err := pipelines.Load("registry.example.com/flotilla:v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var names []string
	for _, task := range res.Tasks {
		names = append(names, task.Name)
		task.SetDefaults(ctx)
		if err := task.Validate(ctx); err != nil {
			t.Errorf("Task %s: %v", task.Name, err)
		}
		for _, s := range task.Spec.Steps {
			if s.Image != "registry.example.com/flotilla:v1.2.3" {
				t.Errorf("Task %s step %s: image %s, want the one asked for", task.Name, s.Name, s.Image)
			}
		}
	}
	if diff := cmp.Diff([]string{pipelines.TaskApplyCanary, pipelines.TaskApplyManifests, pipelines.TaskBumpImage}, names); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	p := res.Pipeline
	if p.Name != pipelines.PipelineName {
		t.Errorf("pipeline %s, want %s", p.Name, pipelines.PipelineName)
	}
	p.SetDefaults(ctx)
	if err := p.Validate(ctx); err != nil {
		t.Errorf("Pipeline %s: %v", p.Name, err)
	}
	for _, pt := range p.Spec.Tasks {
		if _, ok := res.Task(pt.TaskRef.Name); !ok {
			t.Errorf("pipeline task %s refers to Task %s, which is not embedded", pt.Name, pt.TaskRef.Name)
		}
	}
}

// TestStepsMatchTheirCommands checks that every step runs `flotilla task
// <name>`, flotilla by its path in flotilla's image, with a flag the task command defines for every param and result
// of its Task, and no other: the Task and the command cannot drift apart.
func TestStepsMatchTheirCommands(t *testing.T) {
	res, err := pipelines.Load("")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range res.Tasks {
		t.Run(task.Name, func(t *testing.T) {
			if len(task.Spec.Steps) != 1 {
				t.Fatalf("%d steps, want 1", len(task.Spec.Steps))
			}
			s := task.Spec.Steps[0]
			if diff := cmp.Diff([]string{image.Entrypoint}, s.Command); diff != "" {
				t.Fatalf("command (-want +got):\n%s", diff)
			}
			if len(s.Args) < 2 || s.Args[0] != "task" {
				t.Fatalf("args %q: want task <name> ...", s.Args)
			}
			def, ok := tasks.Lookup(s.Args[1])
			if !ok {
				t.Fatalf("step runs task %q, which flotilla does not have", s.Args[1])
			}
			if _, err := def.Parse(s.Args[2:]); err != nil {
				t.Errorf("the command does not take the step's args: %v", err)
			}
			var flags []string
			for _, a := range s.Args[2:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				flags = append(flags, name)
			}
			var want []string
			for _, ps := range task.Spec.Params {
				if ps.Name == "kubeconfig-secret" || ps.Name == "git-secret" {
					continue // mounted as volumes, never passed as flags
				}
				want = append(want, ps.Name)
			}
			for _, r := range task.Spec.Results {
				want = append(want, "result-"+r.Name)
			}
			if def.Cluster {
				want = append(want, "kubeconfig")
			}
			if def.Git {
				want = append(want, "git-credentials")
			}
			slices.Sort(want)
			slices.Sort(flags)
			if diff := cmp.Diff(want, flags); diff != "" {
				t.Errorf("flags of the step (-want +got):\n%s", diff)
			}
			var defParams []string
			for _, p := range def.Params {
				defParams = append(defParams, p.Name)
			}
			var taskParams []string
			for _, ps := range task.Spec.Params {
				if ps.Name != "kubeconfig-secret" && ps.Name != "git-secret" {
					taskParams = append(taskParams, ps.Name)
				}
			}
			slices.Sort(defParams)
			slices.Sort(taskParams)
			if diff := cmp.Diff(defParams, taskParams); diff != "" {
				t.Errorf("params of the Task vs the command (-command +task):\n%s", diff)
			}
		})
	}
}

func TestManifestsPinTheImage(t *testing.T) {
	b, err := pipelines.Manifests("")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "image: "+pipelines.ImageRepository+"\n") {
		t.Errorf("an image without a tag is left:\n%s", b)
	}
	if !strings.Contains(string(b), "image: "+pipelines.DefaultImage()+"\n") {
		t.Errorf("the default image %s is not used:\n%s", pipelines.DefaultImage(), b)
	}
	objs, err := pipelines.Objects("", "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := []string{"Task flotilla/flotilla-apply-canary", "Task flotilla/flotilla-apply-manifests", "Task flotilla/flotilla-bump-image", "Pipeline flotilla/flotilla-rollout"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
}
