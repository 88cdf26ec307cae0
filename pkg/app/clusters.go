package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// The fleet's clusters change live: a configuration swapped in (the
// file's reload, a discovery source) updates the clusters' clients
// (pkg/cluster's Set.Update): a cluster added is read from then on and,
// its labels selecting it into a wave, is in that wave's next rollout; a
// removed one's watch caches stop and the rollouts in flight go on
// without it (events.TypeClustersRemoved, taken by advance).

// clustersLoad refuses, as invalid, a configuration with a cluster added
// or given another kubeconfig whose kubeconfig does not load: the running
// clusters stay as they are. The others were loaded before (a reload of
// applications alone reads no kubeconfig here).
func clustersLoad(old, next *config.Config) error {
	var changed []config.Cluster
	for _, c := range next.Fleet.Clusters {
		o, ok := old.Cluster(c.Name)
		if !ok || o.Kubeconfig != c.Kubeconfig || o.Context != c.Context || !bytes.Equal(o.KubeconfigData, c.KubeconfigData) {
			changed = append(changed, c)
		}
	}
	_, err := cluster.LoadConfigs(changed)
	return err
}

// followClusters makes the Set's clusters next's and journals those
// removed, for the rollouts in flight; source is what swapped next in
// (the file's change, SIGHUP, cluster discovery).
func (s *Server) followClusters(ctx context.Context, source string, next *config.Config) {
	if s.clusters == nil {
		return
	}
	ch, err := s.clusters.Update(next.Fleet.Clusters)
	if err != nil { // the guard loaded them a moment ago: a kubeconfig changed since
		s.log.ErrorContext(ctx, "clusters: the new configuration's clusters did not load; the clients stay as they were", "error", err)
		return
	}
	if ch.Empty() {
		return
	}
	s.log.InfoContext(ctx, "clusters changed", "added", ch.Added, "removed", ch.Removed, "changed", ch.Changed)
	if len(ch.Removed) == 0 {
		return
	}
	e, err := clustersRemoved(ch.Removed, source, next)
	if err == nil {
		_, err = s.bus.Append(ctx, e)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "clusters: journaling the clusters removed failed; the rollouts in flight with them wait for their deadlines", "clusters", ch.Removed, "error", err)
	}
}

// clustersRemoved is the event of clusters removed from the fleet, its id
// the same on every replica that swaps the same configuration in (the
// journal keeps one).
func clustersRemoved(removed []string, source string, next *config.Config) (cloudevents.Event, error) {
	names := make([]string, 0, len(next.Fleet.Clusters))
	for _, c := range next.Fleet.Clusters {
		names = append(names, c.Name)
	}
	h := sha256.Sum256([]byte(strings.Join(removed, ",") + "|" + strings.Join(names, ",")))
	return events.New("clusters-removed/"+hex.EncodeToString(h[:16]), "/flotilla/reload", events.TypeClustersRemoved,
		events.ClustersRemoved{Clusters: removed, Source: source})
}
