package rollout

import (
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Clusters removed from the fleet while a rollout is in flight. The
// rollout was planned with them, but flotilla no longer has their clients:
// a cluster that had not finished (pending, applying, analysed by
// Flagger) leaves the rollout, marked Removed with when and why, and its
// wave goes on with the clusters that remain, as if it had never been in
// it. What a cluster finished (succeeded, failed, reverted) stays as it
// was: it is the rollout's history. A rollout failed or rolling back is
// left alone: its revert of a removed cluster fails and says so.

// RemoveClusters marks the clusters named in gone that r has not finished
// with as removed (at now; message says why) and moves r on when its
// current wave is then done (Advance, with g). It reports the clusters
// it removed; nothing changes when there is none.
func (r *Rollout) RemoveClusters(cause cloudevents.Event, gone []string, message string, g Gates) ([]string, []cloudevents.Event, error) {
	if r.Phase != Progressing && r.Phase != Queued {
		return nil, nil, nil
	}
	var removed []string
	for w := range r.Waves {
		for i := range r.Waves[w].Clusters {
			c := &r.Waves[w].Clusters[i]
			if !slices.Contains(gone, c.Name) {
				continue
			}
			switch c.Phase {
			case ClusterPending, ClusterApplying, ClusterProgressing:
			default:
				continue
			}
			c.Phase, c.Message, c.Run, c.Deadline = ClusterRemoved, message, "", time.Time{}
			c.Updated = g.Now.UTC()
			removed = append(removed, c.Name)
		}
	}
	if len(removed) == 0 || r.Phase != Progressing {
		return removed, nil, nil
	}
	out, err := r.Advance(cause, g)
	return removed, out, err
}
