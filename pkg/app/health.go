package app

import (
	"context"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
)

// clusterHealth is the API's Health port on the fleet's clients.
type clusterHealth struct{ set *cluster.Set }

func (h clusterHealth) Health(ctx context.Context, name string) api.ClusterHealth {
	c := h.set.Health(ctx, name)
	return api.ClusterHealth{Reachable: c.Reachable, Kubernetes: c.Kubernetes, Flagger: string(c.Flagger),
		Canaries: c.Canaries, Waiting: c.Waiting, Detail: c.Detail, Checked: c.Checked}
}
