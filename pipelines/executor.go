package pipelines

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// Executor runs flotilla's pipeline tasks against one cluster of the fleet.
// ApplyCanary runs the flotilla-rollout Pipeline without GitOps and returns
// apply-canary's results.
type Executor interface {
	ApplyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error)
}

// Runner runs the whole flotilla-rollout Pipeline against one cluster: the
// bump of a GitOps application's deployments repository, then
// apply-canary. Both executors implement it besides Executor.
//
// Errors: events.IsPermanent when retrying cannot help (bad params, a
// workload that does not exist, a step that failed permanently); anything
// else is worth retrying.
type Runner interface {
	Run(ctx context.Context, cluster string, p RunParams) (Results, error)
}

// Clusters gives the client configuration of a cluster (pkg/cluster.Set).
type Clusters interface {
	Config(name string) (*rest.Config, error)
}

// applyCanary runs ApplyCanary through a Runner.
func applyCanary(ctx context.Context, r Runner, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	res, err := r.Run(ctx, cluster, FromApplyCanary(p))
	if err != nil {
		return tasks.ApplyCanaryResult{}, err
	}
	return tasks.ApplyCanaryResult{PreviousImage: res.PreviousImage, Changed: res.Changed}, nil
}
