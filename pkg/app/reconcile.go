package app

import (
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/reconcile"
)

// newReconciler builds the check of the clusters against the validated
// digests (pkg/reconcile) on the fleet's clients and watch caches, which
// tell it of primaries changed. In scale-out mode a replica checks the
// applications whose pushes fall in the partitions it holds (the replica
// that plans their rollouts, as the poll's).
func (s *Server) newReconciler(cfg *config.Config, o Options) (*reconcile.Reconciler, error) {
	ro := reconcile.Options{Logger: o.Logger, Metrics: o.Registerer}
	if shared, ok := s.dispatch.(*sharedEngine); ok {
		ro.Owns = func(a config.Application) bool {
			key := dispatch.ImageKey(a.Image)
			if g := a.Git(); g != nil {
				key = dispatch.GitKey(config.DisplayURL(g.URL))
			}
			return shared.held(s.scale.bus.PartitionOf(key))
		}
	}
	r, err := reconcile.New(cfg, s.clusters, s.repo, journal{s.bus}, ro)
	if err != nil {
		return nil, err
	}
	s.clusters.OnPrimaryChange(r.Changed)
	return r, nil
}
