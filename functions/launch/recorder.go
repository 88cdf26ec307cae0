package launch

import (
	"context"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// appliedCluster is what launch records of a cluster its pipeline applied.
type appliedCluster struct {
	name          string
	previousImage string
	at            time.Time
}

// recorder writes the clusters of a wave into the rollout as their
// pipelines finish, every cluster that finished meanwhile in one update: an
// update per cluster would rewrite the whole rollout once per cluster, which
// for a wave of n clusters is n commits of n clusters each.
type recorder struct {
	repo *rollout.Repo
	id   string
	in   chan appliedCluster
	done chan error
}

func startRecorder(ctx context.Context, repo *rollout.Repo, id string) *recorder {
	r := &recorder{repo: repo, id: id, in: make(chan appliedCluster, 256), done: make(chan error, 1)}
	go r.run(ctx)
	return r
}

// add queues a cluster to record.
func (r *recorder) add(c appliedCluster) { r.in <- c }

// close records what is queued and returns the first error of any update.
// Nothing may be added after.
func (r *recorder) close() error {
	close(r.in)
	return <-r.done
}

func (r *recorder) run(ctx context.Context) {
	var first error
	for c := range r.in {
		if err := r.record(ctx, append([]appliedCluster{c}, r.queued()...)); err != nil && first == nil {
			first = err
		}
	}
	r.done <- first
}

// queued takes what is queued now, without waiting.
func (r *recorder) queued() []appliedCluster {
	var out []appliedCluster
	for {
		select {
		case c, open := <-r.in:
			if !open {
				return out
			}
			out = append(out, c)
		default:
			return out
		}
	}
}

// record writes batch in one update.
func (r *recorder) record(ctx context.Context, batch []appliedCluster) error {
	_, err := r.repo.Update(ctx, r.id, func(ro *rollout.Rollout) error {
		for _, a := range batch {
			c, _, err := ro.Cluster(a.name)
			if err != nil {
				return events.Permanent(err)
			}
			if c.PreviousImage == "" {
				c.PreviousImage = a.previousImage
			}
			c.Applied = a.at
			if c.Phase == rollout.ClusterApplying {
				c.Phase = rollout.ClusterProgressing
			}
		}
		return nil
	})
	return err
}
