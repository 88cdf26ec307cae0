package observe

import (
	"context"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// StatusReader reads a canary's live state (pkg/cluster.Set, in production): the canary
// named after workload, and the images of the workload and its primary.
type StatusReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (rollout.CanaryStatus, error)
}

// statusTimeout bounds one read of a cluster: an API server that does not
// answer must not hold the rollout's other events.
const statusTimeout = 10 * time.Second

// Rollouts is the rollout state observe needs (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	Update(ctx context.Context, id string, fn func(*rollout.Rollout) error) (rollout.Rollout, error)
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
}

// Function is the observe function.
type Function struct {
	cfg    *config.Config
	repo   Rollouts
	status StatusReader
	now    func() time.Time
}

// New returns observe; now defaults to time.Now.
func New(cfg *config.Config, repo Rollouts, status StatusReader, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, status: status, now: now}
}

func (*Function) Name() string { return "observe" }
func (*Function) Consumes() []string {
	return []string{events.TypeCanary, events.TypePipelineRunFinished, events.TypeClusterDeadline, events.TypeFunctionFailed}
}

// Handle reads one hint.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	switch e.Type() {
	case events.TypePipelineRunFinished:
		return f.finished(ctx, e)
	case events.TypeClusterDeadline:
		return f.deadline(ctx, e)
	case events.TypeFunctionFailed:
		return f.functionFailed(ctx, e)
	}
	return f.canary(ctx, e)
}

// CachedStatusReader is a StatusReader with a watch cache
// (pkg/cluster.Set, in production): ok is false while the cache cannot answer.
type CachedStatusReader interface {
	CachedCanaryStatus(cluster, namespace string, workload config.Workload) (st rollout.CanaryStatus, ok bool)
}

// cachedStatus reads a canary from the status reader's watch cache, if it
// has one.
func (f *Function) cachedStatus(clusterName string, app config.Application) (rollout.CanaryStatus, bool) {
	c, ok := f.status.(CachedStatusReader)
	if !ok {
		return rollout.CanaryStatus{}, false
	}
	return c.CachedCanaryStatus(clusterName, app.Namespace, app.Workload)
}

// decisive tells whether status st (from the cache) is enough to handle
// canary event c: it shows the outcome the event reports, or the event
// reports no outcome (Flagger's progress, recorded as it is). Never for a
// cluster being reverted: the state a revert waits for is the one the
// cluster had before the rollout, so a cache left behind (its watch cut
// while the API server was away, say) shows it although Flagger has since
// promoted the new image; only a live read says the revert is done.
func decisive(ro *rollout.Rollout, c events.Canary, st rollout.CanaryStatus) bool {
	cl, _, err := ro.Cluster(c.Cluster)
	if err != nil {
		return true // Update reports it
	}
	if cl.Phase == rollout.ClusterReverting {
		return false
	}
	switch c.Outcome {
	case events.CanarySucceeded, events.CanaryInitialized, events.CanaryFailed:
	default:
		return true
	}
	scratch := *cl
	typ, _ := classify(ro, &scratch, c, st)
	return typ != ""
}

// readStatus reads a cluster's canary under statusTimeout.
func (f *Function) readStatus(ctx context.Context, clusterName string, app config.Application) (rollout.CanaryStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return f.status.CanaryStatus(ctx, clusterName, app.Namespace, app.Workload)
}

// canary classifies one canary event.
func (f *Function) canary(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	c, err := events.Decode[events.Canary](e)
	if err != nil {
		return nil, err
	}
	if c.RolloutID == "" {
		return nil, nil // a canary flotilla does not drive
	}
	ro, err := f.repo.Get(ctx, c.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return nil, nil
	}
	st, ok := f.cachedStatus(c.Cluster, app)
	if !ok || !decisive(&ro, c, st) {
		// The cache is not synced, or does not show yet what the event
		// says happened: read the cluster itself.
		var err error
		if st, err = f.readStatus(ctx, c.Cluster, app); err != nil {
			// Not retried: retries would hold the rollout's other events
			// while the cluster is away. The event is a hint; the
			// cluster's deadline (and resync) read it again.
			return nil, fault.Permanent(fmt.Errorf("reading the canary in cluster %s: %w", c.Cluster, err))
		}
	}
	var typ, reason string
	ro, err = f.repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error {
		cl, _, err := r.Cluster(c.Cluster)
		if err != nil {
			return fault.Permanent(err)
		}
		cl.CanaryPhase, cl.CanaryWeight, cl.Message = st.Phase, st.Weight, c.Message
		typ, reason = classify(r, cl, c, st)
		return nil
	})
	if err != nil || typ == "" {
		return nil, err
	}
	cl, wave, _ := ro.Cluster(c.Cluster)
	out, err := events.Derive(e, typ, c.Cluster, events.ClusterResult{RolloutID: ro.ID, Wave: wave, Cluster: cl.Name, Reason: reason})
	return []cloudevents.Event{out}, err
}

// classify decides what a canary event means for a cluster, given the images
// its primary and canary workloads run now.
func classify(r *rollout.Rollout, cl *rollout.Cluster, c events.Canary, st rollout.CanaryStatus) (typ, reason string) {
	primary, target := st.PrimaryImage, st.TargetImage
	switch cl.Phase {
	case rollout.ClusterApplying, rollout.ClusterProgressing:
		switch c.Outcome {
		case events.CanarySucceeded, events.CanaryInitialized:
			if primary == r.Ref() {
				return events.TypeClusterSucceeded, c.Message
			}
		case events.CanaryFailed:
			if target == r.Ref() && primary != r.Ref() {
				return events.TypeClusterFailed, c.Message
			}
		}
	case rollout.ClusterSucceeded:
		// A wave must stay healthy through its bake: a canary of it that
		// fails meanwhile (a new analysis, after a change in the cluster)
		// fails the cluster again.
		if _, w, err := r.Cluster(cl.Name); err == nil && r.Baking(w) && c.Outcome == events.CanaryFailed {
			return events.TypeClusterFailed, "failed during the wave's bake: " + c.Message
		}
	case rollout.ClusterReverting:
		// Whatever Flagger says, the revert is done when both workloads run
		// the previous image and no analysis is under way.
		if st.Settled() && primary == cl.PreviousImage && target == cl.PreviousImage {
			return events.TypeClusterReverted, c.Message
		}
	}
	return "", ""
}
