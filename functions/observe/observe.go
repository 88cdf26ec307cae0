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
	cfg    config.Provider
	repo   Rollouts
	status StatusReader
	now    func() time.Time
}

// New returns observe; now defaults to time.Now.
func New(cfg config.Provider, repo Rollouts, status StatusReader, now func() time.Time) *Function {
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

// cachedStatus reads a canary of rollout ro from the status reader's
// watch cache, if it has one, as ro judges it (rollout.SetStatus).
func (f *Function) cachedStatus(ro rollout.Rollout, clusterName string, app config.Application) (rollout.CanaryStatus, bool) {
	c, ok := f.status.(CachedStatusReader)
	if !ok {
		return rollout.CanaryStatus{}, false
	}
	st, ok := c.CachedCanaryStatus(clusterName, app.Namespace, app.Workload)
	return ro.SetStatus(f.cfg.Current(), app, clusterName, st), ok
}

// JobReader reads a release set's Jobs in a cluster (pkg/cluster.Set, in
// production): a StatusReader that is one has them recorded on the
// rollout's cluster. It logs a read that fails: observe records none then.
type JobReader interface {
	Jobs(ctx context.Context, cluster, namespace string, names []string) ([]rollout.JobStatus, error)
}

// readJobs reads, under statusTimeout, the Jobs of release set app's Job
// members (each named as its workload) in a cluster; none for an
// application, or when they cannot be read (the JobReader logs why; the
// cluster's message says what failed).
func (f *Function) readJobs(ctx context.Context, clusterName string, app config.Application) []rollout.JobStatus {
	jr, ok := f.status.(JobReader)
	if !ok || app.Set == nil {
		return nil
	}
	var names []string
	for _, m := range app.Set.Members {
		if a, ok := f.cfg.Current().Application(m.Name); ok && m.Job {
			names = append(names, a.Workload.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	jobs, err := jr.Jobs(ctx, clusterName, app.Namespace, names)
	if err != nil {
		return nil // the reader logged it
	}
	return jobs
}

// readStatus reads a cluster's canary of rollout ro under statusTimeout,
// as ro judges it: a release set of image members' members' images read
// as the version they make up (rollout.SetStatus).
func (f *Function) readStatus(ctx context.Context, ro rollout.Rollout, clusterName string, app config.Application) (rollout.CanaryStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := f.status.CanaryStatus(ctx, clusterName, app.Namespace, app.Workload)
	if err != nil {
		return st, err
	}
	return ro.SetStatus(f.cfg.Current(), app, clusterName, st), nil
}

// change is one event's effect on its rollout, read outside the
// transaction (a cluster's read may take seconds) and applied inside it.
type change func(r *rollout.Rollout) ([]cloudevents.Event, error)

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
	ch, err := f.canaryChange(ctx, ro, e, c)
	if err != nil || ch == nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, ro.ID, ch)
	return out, err
}

// canaryChange reads the cluster of canary event c of rollout ro: nil when
// it changes nothing.
func (f *Function) canaryChange(ctx context.Context, ro rollout.Rollout, e cloudevents.Event, c events.Canary) (change, error) {
	app, ok := f.cfg.Current().Application(ro.Application)
	if !ok {
		return nil, nil
	}
	st, ok := f.cachedStatus(ro, c.Cluster, app)
	if !ok || !ro.Decisive(c, st) {
		// The cache is not synced, or does not show yet what the event
		// says happened: read the cluster itself.
		var err error
		if st, err = f.readStatus(ctx, ro, c.Cluster, app); err != nil {
			// Not retried: retries would hold the rollout's other events
			// while the cluster is away. The event is a hint; the
			// cluster's deadline (and resync) read it again.
			return nil, fault.Permanent(fmt.Errorf("reading the canary in cluster %s: %w", c.Cluster, err))
		}
	}
	// A release set's cluster its canaries may decide now: its Jobs too.
	// The run's end records them as well, but once Flagger's event
	// decided the rollout's last cluster the rollout is over (and
	// frozen) when the run's end comes.
	var jobs []rollout.JobStatus
	if cl, _, err := ro.Cluster(c.Cluster); err == nil && applyingCluster(cl) {
		jobs = f.readJobs(ctx, c.Cluster, app)
	}
	deadline := f.now().Add(app.Delivery.StepDeadline())
	return func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if cl, _, err := r.Cluster(c.Cluster); err == nil && applyingCluster(cl) {
			r.RecordJobs(c.Cluster, jobs)
		}
		return r.Canary(e, c, st, deadline)
	}, nil
}

// applyingCluster tells whether cl is in the apply of the rollout's
// version (not its revert: a revert leaves the Jobs as the version left
// them).
func applyingCluster(cl *rollout.Cluster) bool {
	return cl.Phase == rollout.ClusterApplying || cl.Phase == rollout.ClusterProgressing
}
