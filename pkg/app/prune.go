package app

import (
	"context"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/prune"
)

// pruneTimeout bounds the start-up prune, which holds up serving: clusters
// that do not answer must not keep flotilla from starting.
const pruneTimeout = time.Minute

// prune removes, once at start-up, what flotilla created for delivery
// policies the config no longer has (package prune). What it cannot do is
// logged, never fatal: a cluster that is down must not stop flotilla, and the
// next start tries again.
func (s *Server) prune(ctx context.Context) {
	if s.pruneSet == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, pruneTimeout)
	defer cancel()
	// The configuration in force: with the Application resources'
	// applications (resources.go), which the file lacks.
	rep, err := prune.Prune(ctx, s.live.Current(), s.pruneSet, prune.Options{Logger: s.log})
	if err != nil {
		s.log.WarnContext(ctx, "pruning removed delivery policies", "error", err)
	}
	deleted := 0
	for _, objs := range rep.Deleted {
		deleted += len(objs)
	}
	if deleted > 0 {
		s.log.InfoContext(ctx, "pruned removed delivery policies", "deleted", deleted, "clusters", len(rep.Deleted))
	}
}
