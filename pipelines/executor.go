package pipelines

import (
	"context"

	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

// Executor runs flotilla's pipeline tasks against one cluster of the fleet.
type Executor interface {
	ApplyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error)
}

// Clusters gives the client configuration of a cluster (pkg/cluster.Set).
type Clusters interface {
	Config(name string) (*rest.Config, error)
}

// Embedded runs the tasks in process: the default executor, no Tekton needed.
type Embedded struct {
	clusters Clusters
}

// NewEmbedded returns the in-process executor.
func NewEmbedded(clusters Clusters) *Embedded { return &Embedded{clusters: clusters} }

// ApplyCanary runs the apply-canary task against cluster.
func (e *Embedded) ApplyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	cfg, err := e.clusters.Config(cluster)
	if err != nil {
		return tasks.ApplyCanaryResult{}, err
	}
	return tasks.ApplyCanary(ctx, cfg, p)
}
