package pipelines

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// The executors, each in its package, run the flotilla-rollout Pipeline
// against one cluster: pipelines/embedded in process, pipelines/tektonrun
// as Tekton PipelineRuns. Both have the same method,
//
//	Run(ctx context.Context, cluster string, p RunParams) (Results, error)
//
// which their consumer (pipelines/deliver) declares as its Executor. Errors:
// fault.IsPermanent when retrying cannot help (bad params, a workload that
// does not exist, a step that failed permanently); anything else is worth
// retrying.

// Clusters gives the client configuration of a cluster (pkg/cluster.Set).
type Clusters interface {
	Config(name string) (*rest.Config, error)
}

// ApplyCanary runs apply-canary alone (the pipeline without GitOps)
// through an executor's Run, and returns apply-canary's results.
func ApplyCanary(ctx context.Context, run func(context.Context, string, RunParams) (Results, error), cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	res, err := run(ctx, cluster, FromApplyCanary(p))
	if err != nil {
		return tasks.ApplyCanaryResult{}, err
	}
	return tasks.ApplyCanaryResult{PreviousImage: res.PreviousImage, Changed: res.Changed, PreviousMembers: res.PreviousMembers}, nil
}
