package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"

	"github.com/flotilla-cd/flotilla/pipelines"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"k8s.io/client-go/rest"
)

// Executor runs the flotilla-rollout Pipeline in process: the default
// executor, no Tekton needed. It parses the same embedded Pipeline and Tasks
// Tekton runs and calls, for each step's `flotilla task <name> ...`
// command, the Go function that command calls.
type Executor struct {
	clusters pipelines.Clusters
	gitAuth  func(url string) (gitops.Auth, error)
	mirror   *gitops.Mirror
	log      *slog.Logger
}

// Option configures the embedded executor.
type Option func(*Executor)

// WithGitAuth sets the credentials bump-image uses for a deployments
// repository. Default: none.
func WithGitAuth(f func(url string) (gitops.Auth, error)) Option {
	return func(e *Executor) { e.gitAuth = f }
}

// WithMirror keeps the repositories apply-manifests renders from in
// mirror between runs. Default: each run fetches a copy of its own.
func WithMirror(m *gitops.Mirror) Option {
	return func(e *Executor) { e.mirror = m }
}

// WithLogger logs task starts and ends at debug level. Default:
// none.
func WithLogger(l *slog.Logger) Option {
	return func(e *Executor) { e.log = l }
}

// NewEmbedded returns the in-process executor.
func New(clusters pipelines.Clusters, opts ...Option) *Executor {
	e := &Executor{clusters: clusters}
	for _, o := range opts {
		o(e)
	}
	return e
}

// embeddedPipeline is the embedded Pipeline and its Tasks, parsed and
// checked once: a 1,000-cluster wave starts 1,000 runs of it.
type embeddedPipeline struct {
	res   pipelines.Resources
	tasks map[string]*tektonv1.TaskSpec
	graph graph
}

var loadEmbedded = sync.OnceValues(func() (embeddedPipeline, error) {
	res, err := pipelines.Load("")
	if err != nil {
		return embeddedPipeline{}, err
	}
	g, err := prepare(res.Pipeline.Spec)
	if err != nil {
		return embeddedPipeline{}, fmt.Errorf("pipeline %s: %w", res.Pipeline.Name, err)
	}
	return embeddedPipeline{res: res, tasks: taskSpecs(res), graph: g}, nil
})

// ApplyCanary runs the pipeline without GitOps against cluster.
func (e *Executor) ApplyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	return pipelines.ApplyCanary(ctx, e.Run, cluster, p)
}

// Run runs the flotilla-rollout Pipeline against cluster.
func (e *Executor) Run(ctx context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error) {
	ep, err := loadEmbedded()
	if err != nil {
		return pipelines.Results{}, fmt.Errorf("loading the embedded pipeline: %w", err)
	}
	params, err := p.PipelineParams()
	if err != nil {
		return pipelines.Results{}, err
	}
	params[pipelines.ParamKubeconfigSecret] = cluster // unused in process: the cluster's config is at hand
	timeout := p.Timeout
	if timeout == 0 {
		timeout = pipelines.DefaultTimeout
	}
	eng := &engine{tasks: ep.tasks, step: e.stepRunner(cluster), log: e.log}
	out, err := eng.runGraph(ctx, ep.res.Pipeline, ep.graph, p.RunName(cluster), params, timeout)
	if err != nil {
		return pipelines.Results{}, err
	}
	return pipelines.ResultsFrom(out.Results)
}

func taskSpecs(r pipelines.Resources) map[string]*tektonv1.TaskSpec {
	m := map[string]*tektonv1.TaskSpec{}
	for _, t := range r.Tasks {
		m[t.Name] = &t.Spec
	}
	return m
}

// stepRunner runs steps against cluster: its config comes from Clusters
// rather than from a kubeconfig mounted from a Secret.
func (e *Executor) stepRunner(cluster string) stepRunner {
	env := tasks.Env{
		Cluster: func() (*rest.Config, error) { return e.clusters.Config(cluster) },
		GitAuth: e.gitAuth,
		Mirror:  e.mirror,
	}
	return func(ctx context.Context, c stepCall) (map[string]string, error) {
		return runFlotillaStep(ctx, c.Step, env)
	}
}

// runFlotillaStep runs a step whose command is `flotilla task <name> ...`
// by calling the task's Go function with the step's args parsed by the same
// flags, and returns the results it would have written, by the names of
// their $(results.<name>.path) files.
func runFlotillaStep(ctx context.Context, s tektonv1.Step, env tasks.Env) (map[string]string, error) {
	argv := append(append([]string{}, s.Command...), s.Args...)
	if len(argv) < 3 || path.Base(argv[0]) != "flotilla" || argv[1] != "task" {
		return nil, fault.Permanent(fmt.Errorf("step %s runs %q: the embedded executor runs `flotilla task <name>` steps only", s.Name, argv))
	}
	def, ok := tasks.Lookup(argv[2])
	if !ok {
		return nil, fault.Permanent(fmt.Errorf("step %s runs task %q, which flotilla does not have", s.Name, argv[2]))
	}
	in, err := def.Parse(argv[3:])
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	paths := in.ResultPaths()
	res, err := in.Run(ctx, env)
	if err != nil {
		res = tasks.Results{tasks.ResultError: tasks.ErrorResult(err)}
	}
	for name, p := range paths {
		file, ok := strings.CutPrefix(p, pipeline.DefaultResultPath+"/")
		if v, has := res[name]; ok && has {
			out[file] = v
		}
	}
	return out, err
}
