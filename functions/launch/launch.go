package launch

import (
	"context"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// StatusReader reads a canary's live state (pkg/cluster.Set): the canary
// named after workload, and the images of the workload and its primary, of
// workload's kind.
type StatusReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (cluster.CanaryStatus, error)
}

// Hooks builds the event hook a canary reports to, for a cluster and rollout.
type Hooks func(cluster, rolloutID string) canary.EventHook

// Function is the launch function.
type Function struct {
	cfg         *config.Config
	repo        *rollout.Repo
	exec        pipelines.Executor
	status      StatusReader
	hooks       Hooks
	maxParallel int
}

// DefaultMaxParallel is the default bound on the pipelines launch runs at
// once. It is above the wave sizes flotilla targets (50 clusters) so a whole
// wave's apply requests go out together instead of in rounds, each waiting for
// the slowest cluster of the round before.
const DefaultMaxParallel = 128

// New returns launch; maxParallel bounds the pipelines run at once (default
// DefaultMaxParallel).
func New(cfg *config.Config, repo *rollout.Repo, exec pipelines.Executor, status StatusReader, hooks Hooks, maxParallel int) *Function {
	if maxParallel <= 0 {
		maxParallel = DefaultMaxParallel
	}
	return &Function{cfg: cfg, repo: repo, exec: exec, status: status, hooks: hooks, maxParallel: maxParallel}
}

func (*Function) Name() string       { return "launch" }
func (*Function) Consumes() []string { return []string{events.TypeWaveStarted} }

// Handle applies the rollout to every cluster of the wave.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	w, err := events.Decode[events.WaveStarted](e)
	if err != nil {
		return nil, err
	}
	ro, err := f.repo.Get(ctx, w.RolloutID)
	if err != nil {
		return nil, err
	}
	if ro.Phase != rollout.Progressing || ro.Wave != w.Wave {
		return nil, nil // the rollout moved on (failed, superseded): nothing to launch
	}
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return nil, events.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", ro.ID, ro.Application))
	}
	// One transaction marks the whole wave Applying: a transaction (and its
	// fsync) per cluster would hold back the later clusters' apply requests.
	if _, err := f.repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error {
		for _, name := range w.Clusters {
			c, _, err := r.Cluster(name)
			if err != nil {
				return events.Permanent(err)
			}
			if c.Phase == rollout.ClusterPending {
				c.Phase = rollout.ClusterApplying
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var (
		mu  sync.Mutex
		out []cloudevents.Event
	)
	rec := startRecorder(ctx, f.repo, ro.ID)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(f.maxParallel)
	for _, name := range w.Clusters {
		g.Go(func() error {
			ev, err := f.launchCluster(gctx, e, ro, app, w.Wave, name, rec)
			if err != nil {
				return err
			}
			mu.Lock()
			out = append(out, ev)
			mu.Unlock()
			return nil
		})
	}
	err = g.Wait()
	// The rollout records every applied cluster before their events go out.
	if rerr := rec.close(); err == nil {
		err = rerr
	}
	return out, err
}

func (f *Function) launchCluster(ctx context.Context, e cloudevents.Event, ro rollout.Rollout, app config.Application, wave int, name string, rec *recorder) (cloudevents.Event, error) {
	result := func(typ, reason string) (cloudevents.Event, error) {
		return events.Derive(e, typ, name, events.ClusterResult{RolloutID: ro.ID, Wave: wave, Cluster: name, Reason: reason})
	}
	applied := time.Now().UTC()
	objs := canary.Render(app, canary.Input{Instance: f.cfg.Server.Instance, Cluster: name, Rollout: ro.ID, Event: f.hooks(name, ro.ID)})
	deps, err := objs.Dependencies()
	if err != nil {
		return result(events.TypeClusterFailed, "rendering the delivery policy: "+err.Error())
	}
	res, err := pipelines.Apply(ctx, f.exec, name, app, ro.Tag, tasks.ApplyCanaryParams{
		Rollout:   ro.ID,
		Namespace: app.Namespace,
		Kind:      app.Workload.Kind,
		Workload:  app.Workload.Name,
		Container: app.Workload.Container,
		Image:     ro.Ref(),
		Canary:    objs.Canary,
		Objects:   deps,
	})
	if events.IsPermanent(err) {
		return result(events.TypeClusterFailed, "pipeline failed: "+err.Error())
	}
	if err != nil {
		return cloudevents.Event{}, fmt.Errorf("applying to %s: %w", name, err)
	}
	rec.add(appliedCluster{name: name, previousImage: res.PreviousImage, at: applied})
	if !res.Changed {
		// Flagger sees no new revision and will report nothing: if the primary
		// already runs the digest, the cluster is done.
		st, err := f.status.CanaryStatus(ctx, name, app.Namespace, app.Workload)
		if err == nil && st.PrimaryImage == ro.Ref() {
			return result(events.TypeClusterSucceeded, "already running "+ro.Ref())
		}
	}
	return result(events.TypeClusterApplied, "")
}
