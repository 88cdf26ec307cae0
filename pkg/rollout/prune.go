package rollout

import (
	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Prune is the prune a cluster's success asks for (#33 item 2): when
// cluster has succeeded in r, which is still progressing (Record took the
// success), and r's application renders a git repository and prunes
// (g.App), the executors are asked to delete from it what r's commit no
// longer renders (prune.requested, caused by cause, due by the step's
// deadline). Else nothing: an image application, prune false, a result
// Record did not take (a rollout that ended: its rollback restores the
// previous commit's objects instead), a cluster that failed.
//
// advance asks, not the executors on cluster.succeeded: the runner lives
// in a dispatch lane of its own and advance in the default one, and the
// consumers of one event type share one lane.
func (r *Rollout) Prune(cause cloudevents.Event, cluster string, g Gates) ([]cloudevents.Event, error) {
	git := g.App.Git()
	if git == nil || !git.Prunes() || r.Phase != Progressing {
		return nil, nil
	}
	cl, w, err := r.Cluster(cluster)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	if cl.Phase != ClusterSucceeded {
		return nil, nil
	}
	rev := r.Ref()
	if c, ok := r.Versions.Commit(g.App); ok {
		rev = c.Ref() // a set of git and image members: its git members' commit
	}
	ev, err := events.Derive(cause, events.TypePruneRequested, r.ID+"/"+cluster, events.PruneRequested{
		RolloutID: r.ID, Application: r.Application, Wave: w, Cluster: cluster, Revision: rev,
		Deadline: g.Now.UTC().Add(g.App.Delivery.StepDeadline()),
	})
	if err != nil {
		return nil, err
	}
	ev.SetSubject(cluster)
	return []cloudevents.Event{ev}, nil
}
