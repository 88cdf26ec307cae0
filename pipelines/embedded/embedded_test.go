package embedded

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bumpOnly is the embedded flotilla-rollout Pipeline with its bump-image
// task only: it needs a git repository, not a cluster.
func bumpOnly(t *testing.T) (*engine, *tektonv1.Pipeline) {
	t.Helper()
	res, err := pipelines.Load("")
	if err != nil {
		t.Fatal(err)
	}
	p := res.Pipeline.DeepCopy()
	p.Spec.Tasks = p.Spec.Tasks[:1]
	p.Spec.Results = p.Spec.Results[2:3]
	if p.Spec.Tasks[0].Name != "bump-image" || p.Spec.Results[0].Name != pipelines.ResultCommit {
		t.Fatalf("the pipeline's first task is %s, its last result %s", p.Spec.Tasks[0].Name, p.Spec.Results[0].Name)
	}
	return &engine{tasks: taskSpecs(res), step: New(nil).stepRunner("c1")}, p
}

// TestEmbeddedRunsTheStepCommands runs the embedded bump-image Task's step,
// `flotilla task bump-image --...`, through the same flags and Go function
// as the command, against a real repository.
func TestEmbeddedRunsTheStepCommands(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"apps/web/kustomization.yaml": "images:\n  - name: registry.example.com/web\n    newTag: \"1\"\n"})
	eng, p := bumpOnly(t)
	rp := pipelines.RunParams{
		Rollout: "r1", Application: "web", Image: "registry.example.com/web:2",
		Canary: &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
		GitOps: &pipelines.GitOps{URL: url, Paths: []string{"apps/web/kustomization.yaml"}},
	}
	params, err := rp.PipelineParams()
	if err != nil {
		t.Fatal(err)
	}
	params[pipelines.ParamKubeconfigSecret] = "unused"
	for i, wantChanged := range []string{"true", "false"} {
		out, err := eng.run(t.Context(), p, "run1", params, time.Minute)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		head := gittest.Head(t, url)
		if diff := cmp.Diff(map[string]string{pipelines.ResultCommit: head.Hash.String()}, out.Results); diff != "" {
			t.Errorf("run %d: results (-want +got):\n%s", i+1, diff)
		}
		if got := out.Tasks["bump-image"].Results[tasks.ResultChanged]; got != wantChanged {
			t.Errorf("run %d: changed = %q, want %q", i+1, got, wantChanged)
		}
		if !strings.Contains(head.Message, "flotilla: web 2 (rollout r1)") {
			t.Errorf("commit message %q", head.Message)
		}
	}

	params[tasks.ParamGitEdit] = "sed"
	out, err := eng.run(t.Context(), p, "run2", params, time.Minute)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), `edit "sed"`) {
		t.Fatalf("run with an unknown edit: %v, want a permanent error", err)
	}
	if o := out.Tasks["bump-image"]; o.Attempts != 1 || !strings.Contains(o.Results[tasks.ResultError], `edit "sed"`) {
		t.Errorf("outcome %+v: want one attempt and the error result", o)
	}
}

func TestRunFlotillaStepRefusesOtherCommands(t *testing.T) {
	for _, s := range []tektonv1.Step{
		{Name: "sh", Command: []string{"sh", "-c", "echo"}},
		{Name: "unknown", Command: []string{"flotilla"}, Args: []string{"task", "deploy-everything"}},
		{Name: "bad flag", Command: []string{"/ko-app/flotilla"}, Args: []string{"task", "bump-image", "--bogus=1"}},
	} {
		if _, err := runFlotillaStep(t.Context(), s, tasks.Env{}); !fault.IsPermanent(err) {
			t.Errorf("step %s: %v, want a permanent error", s.Name, err)
		}
	}
}

// BenchmarkEmbeddedOverhead measures what the embedded executor adds to an
// apply-canary: the pipeline's params encoded, the DAG run, the step's
// command line substituted and parsed, the canary decoded; everything but
// the API calls.
func BenchmarkEmbeddedOverhead(b *testing.B) {
	res, err := pipelines.Load("")
	if err != nil {
		b.Fatal(err)
	}
	step := func(_ context.Context, c stepCall) (map[string]string, error) {
		def, _ := tasks.Lookup(c.Step.Args[1])
		in, err := def.Parse(c.Step.Args[2:])
		if err != nil {
			return nil, err
		}
		p, err := in.Params()
		if err != nil {
			return nil, err
		}
		if _, err := tasks.ApplyCanaryParamsFrom(p); err != nil {
			return nil, err
		}
		return map[string]string{"previous-image": "web:1", "changed": "true"}, nil
	}
	eng := &engine{tasks: taskSpecs(res), step: step}
	g, err := prepare(res.Pipeline.Spec) // once, as Executor.Run's
	if err != nil {
		b.Fatal(err)
	}
	rp := pipelines.RunParams{
		Rollout: "r1", Namespace: "apps", Workload: "web", Image: "registry.example.com/web@sha256:" + strings.Repeat("a", 64),
		Canary: &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: flaggerv1.CanarySpec{
			Provider: "kubernetes", Service: flaggerv1.CanaryService{Port: 80},
			Analysis: &flaggerv1.CanaryAnalysis{Interval: "1m", Threshold: 5, Iterations: 10},
		}},
	}
	b.ReportAllocs()
	for b.Loop() {
		params, err := rp.PipelineParams()
		if err != nil {
			b.Fatal(err)
		}
		params[pipelines.ParamKubeconfigSecret] = "c1"
		if _, err := eng.runGraph(b.Context(), res.Pipeline, g, "run", params, time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// TestApplyCanaryIsBoundedByTheRun runs the embedded Pipeline with a
// step that reports its context's deadline: apply-canary, which waits
// through every member's analysis for a release set of image members, has
// no attempt timeout of its own (it had 5m), the run's bounds it: its
// deadline is the run's (the set's step deadline), here 3h away.
func TestApplyCanaryIsBoundedByTheRun(t *testing.T) {
	res, err := pipelines.Load("")
	if err != nil {
		t.Fatal(err)
	}
	web := func(name string) *flaggerv1.Canary {
		return &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flaggerv1.CanarySpec{Provider: "kubernetes"}}
	}
	api := "registry.example.com/web-api@sha256:" + strings.Repeat("a", 64)
	const timeout = 3 * time.Hour
	for _, tt := range []struct {
		name string
		rp   pipelines.RunParams
	}{
		{name: "an image set's run", rp: pipelines.RunParams{
			Rollout: "r1", Namespace: "web", Workload: "web-api", Image: "sha256:" + strings.Repeat("0", 64), Canary: web("web-api"),
			Members: []tasks.SetMember{
				{Application: "web-api", Kind: "Deployment", Workload: "web-api", Image: api, Canary: web("web-api")},
				{Application: "web-frontend", Kind: "Deployment", Workload: "web-frontend", Image: "registry.example.com/web-frontend@sha256:" + strings.Repeat("f", 64), Canary: web("web-frontend")},
			},
		}},
		{name: "an image application's run", rp: pipelines.RunParams{
			Rollout: "r1", Namespace: "web", Workload: "web-api", Image: api, Canary: web("web-api"),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			deadlines := map[string]time.Duration{}
			start := time.Now()
			step := func(ctx context.Context, c stepCall) (map[string]string, error) {
				d, ok := ctx.Deadline()
				if !ok {
					return nil, fault.Permanent(errors.New("no deadline"))
				}
				deadlines[c.PipelineTask] = d.Sub(start).Round(time.Minute)
				return map[string]string{"previous-image": api, "changed": "true"}, nil
			}
			params, err := tt.rp.PipelineParams()
			if err != nil {
				t.Fatal(err)
			}
			params[pipelines.ParamKubeconfigSecret] = "c1"
			eng := &engine{tasks: taskSpecs(res), step: step}
			if _, err := eng.run(t.Context(), res.Pipeline, "run1", params, timeout); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]time.Duration{"apply-canary": timeout}, deadlines); diff != "" {
				t.Errorf("the steps' deadlines, from the run's start (-want +got):\n%s", diff)
			}
		})
	}
}
