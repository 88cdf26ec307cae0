package deliver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Runner answers pipeline run requests: a dispatch function in a lane of
// its own.
type Runner struct {
	d        *Deliverer
	answers  Answers
	rollouts RolloutReader
	starts   Starts
	lane     dispatch.Lane
	now      func() time.Time
	log      *slog.Logger
	// workloads serialises the runs of one application in one cluster.
	workloads keyedLock
}

// Starts journals the pipelinerun.started of a request as its run begins
// (pkg/store implements it); the journal drops a repeat of its id, so a
// request retried or handed over again after a crash starts once.
type Starts interface {
	Append(ctx context.Context, evs ...cloudevents.Event) ([]bus.Record, error)
}

// AnnounceStarts has the runner journal a pipelinerun.started through j
// when it takes a request up, beside the run: the run does not wait for it,
// its answer does (started comes before finished).
func (r *Runner) AnnounceStarts(j Starts) *Runner {
	r.starts = j
	return r
}

// Lane defaults.
const (
	// DefaultRunners bounds the runs in flight: above the wave sizes
	// flotilla targets (DESIGN: 1,000 clusters in one wave), so a wave's
	// requests go out together. At 128, a wave of 1,000 went out in eight
	// rounds, each as long as the slowest cluster's apply (BENCHMARKS.md,
	// "One wave of 1,000 clusters"); a Tekton run holds its runner until
	// its PipelineRun ends, so a bound below the wave serialises the wave.
	// An idle runner is a parked goroutine.
	DefaultRunners = 1024
	// runTimeout bounds one attempt; the request's deadline bounds them
	// all.
	runTimeout = 30 * time.Minute
	// startTimeout bounds journaling a run's pipelinerun.started.
	startTimeout = time.Minute
)

// Answers tells whether an event is journaled (pkg/store implements it): a
// request whose answer is, was run already (dispatch delivers at least
// once: after a crash it may hand a request over again).
type Answers interface {
	Has(ctx context.Context, id string) (bool, error)
}

// RolloutReader reads a rollout's phase (pkg/state): a request of a
// rollout that has ended meanwhile (superseded by a newer version) is not
// run.
type RolloutReader interface {
	Phase(ctx context.Context, id string) (rollout.Phase, error)
}

// SkipEnded has the runner read each request's rollout first and skip the
// requests of rollouts that have ended.
func (r *Runner) SkipEnded(rollouts RolloutReader) *Runner {
	r.rollouts = rollouts
	return r
}

// NewRunner returns the runner; answers (nil: none) keeps it from running
// a request twice; runners bounds the runs in flight (default
// DefaultRunners); log (default none) gets a line per run.
func NewRunner(d *Deliverer, answers Answers, runners int, log *slog.Logger) *Runner {
	if runners <= 0 {
		runners = DefaultRunners
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{d: d, answers: answers, now: time.Now, log: log, lane: dispatch.Lane{
		Name: "pipelines", Workers: runners, CallTimeout: runTimeout,
		// The deadline, not a count, ends the retries: a cluster whose
		// API server is down is tried until its step's time is up.
		Attempts: 1 << 20, MaxBackoff: 10 * time.Second,
	}}
}

// WithClock sets the clock the runs' deadlines are read on (default
// time.Now): the engine's (app.Options.Clock).
func (r *Runner) WithClock(now func() time.Time) *Runner {
	if now != nil {
		r.now = now
	}
	return r
}

func (*Runner) Name() string { return "pipeline" }
func (*Runner) Consumes() []string {
	return []string{events.TypePipelineRunRequested, events.TypePruneRequested}
}
func (r *Runner) Lane() dispatch.Lane { return r.lane }

// Handle runs one request. A failure worth retrying is returned (the
// dispatcher retries it, off the workers) until the request's deadline;
// then, or on a permanent failure, the run is reported finished with its
// error.
func (r *Runner) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	if e.Type() == events.TypePruneRequested {
		return r.prune(ctx, e)
	}
	req, err := events.Decode[events.PipelineRunRequested](e)
	if err != nil {
		return nil, err
	}
	if r.answers != nil {
		done, err := r.answers.Has(ctx, answerID(e))
		if err != nil {
			return nil, fmt.Errorf("looking up the answer to %s: %w", e.ID(), err)
		}
		if done {
			r.log.DebugContext(ctx, "pipeline run answered already", "rollout_id", req.RolloutID, "cluster", req.Cluster, "step", req.Step)
			return nil, nil
		}
	}
	// One run at a time writes an application's workload in a cluster:
	// the runs of a superseded rollout may still be in flight when the
	// newer one's start, and the last to write would win. Taken before
	// the check that the rollout has not ended, so a run that waited
	// behind a newer rollout's sees it superseded and writes nothing.
	unlock, err := r.workloads.lock(ctx, req.Application+"/"+req.Cluster)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if r.rollouts != nil {
		phase, err := r.rollouts.Phase(ctx, req.RolloutID)
		if err == nil && phase.Done() {
			r.log.InfoContext(ctx, "not running the pipeline of a rollout that has ended", "rollout_id", req.RolloutID, "phase", phase,
				"cluster", req.Cluster, "step", req.Step)
			return nil, nil
		}
	}
	finished := events.PipelineRunFinished{
		RolloutID: req.RolloutID, Wave: req.Wave, Cluster: req.Cluster,
		Purpose: req.Purpose, Step: req.Step, Image: req.Image,
	}
	if req.Deadline.IsZero() || !r.now().Before(req.Deadline) {
		finished.Error = fmt.Sprintf("the run was not done by its deadline %s", req.Deadline.Format(time.RFC3339))
		return r.finish(e, finished)
	}
	// The deadline is on the engine's clock (WithClock); the run's
	// context gets what is left of it in wall time.
	runCtx, cancel := context.WithTimeout(ctx, req.Deadline.Sub(r.now()))
	defer cancel()
	r.log.InfoContext(ctx, "running pipeline", "rollout_id", req.RolloutID, "cluster", req.Cluster, "purpose", req.Purpose,
		"step", req.Step, "image", req.Image, "deadline", req.Deadline)
	started := r.announce(ctx, e, req)
	res, err := r.d.Deliver(runCtx, req)
	select {
	case <-started:
	case <-ctx.Done():
		// Stopping (the partition handed over): the answer is not
		// journaled, so it need not wait for the start's; the request
		// is replayed, and finds the cluster set.
		return nil, ctx.Err()
	}
	switch {
	case err == nil:
		finished.PreviousImage, finished.Changed, finished.PreviousMembers = res.PreviousImage, res.Changed, res.PreviousMembers
		if res.PrunedCount > 0 {
			r.log.InfoContext(ctx, "pruned what the commit no longer renders", "rollout_id", req.RolloutID, "cluster", req.Cluster,
				"purpose", req.Purpose, "objects", res.Pruned, "count", res.PrunedCount)
			out, err := r.finish(e, finished)
			if err != nil {
				return nil, err
			}
			pruned, err := r.pruned(e, events.ClusterPruned{
				RolloutID: req.RolloutID, Application: req.Application, Wave: req.Wave, Cluster: req.Cluster,
				Revision: req.Image, Purpose: req.Purpose, Objects: res.Pruned, Count: res.PrunedCount,
			})
			if err != nil {
				return nil, err
			}
			return append(out, pruned), nil
		}
	case fault.IsPermanent(err):
		finished.Error = "pipeline failed: " + err.Error()
	case ctx.Err() != nil:
		return nil, err // flotilla is stopping: the run is replayed at the next start
	case errors.Is(err, context.DeadlineExceeded) || !r.now().Before(req.Deadline):
		finished.Error = fmt.Sprintf("pipeline not done by its deadline %s: %v", req.Deadline.Format(time.RFC3339), err)
	default:
		return nil, fmt.Errorf("running the %s pipeline for cluster %s: %w", req.Purpose, req.Cluster, err)
	}
	return r.finish(e, finished)
}

// prune deletes what a git application's commit no longer renders from a
// cluster that succeeded (Deliverer.Prune), as advance asked when it
// recorded the success, under the lock of the application's runs in that
// cluster: a revert that took the cluster over meanwhile left nothing
// pending for the commit. The rollout may have ended since (its last
// cluster's success ends it): pruned all the same. Retried until the
// request's deadline; a permanent failure, or the deadline, is logged and
// left (the next commit's apply carries what is pending).
func (r *Runner) prune(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	req, err := events.Decode[events.PruneRequested](e)
	if err != nil {
		return nil, err
	}
	log := r.log.With("rollout_id", req.RolloutID, "cluster", req.Cluster, "revision", req.Revision)
	if app, ok := r.d.cfg.Current().Application(req.Application); !ok || app.Git() == nil || !app.Git().Prunes() {
		return nil, nil
	}
	if !r.now().Before(req.Deadline) {
		log.ErrorContext(ctx, "pruning what the commit no longer renders: not done by its deadline", "deadline", req.Deadline)
		return nil, nil
	}
	unlock, err := r.workloads.lock(ctx, req.Application+"/"+req.Cluster)
	if err != nil {
		return nil, err
	}
	defer unlock()
	runCtx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	res, err := r.d.Prune(runCtx, req.Application, req.Cluster, req.RolloutID, req.Revision)
	switch {
	case err == nil && res.PrunedCount == 0:
		log.InfoContext(ctx, "nothing left to prune")
		return nil, nil
	case err == nil:
		log.InfoContext(ctx, "pruned what the commit no longer renders", "objects", res.Pruned, "count", res.PrunedCount)
		out, err := r.pruned(e, events.ClusterPruned{
			RolloutID: req.RolloutID, Application: req.Application, Wave: req.Wave, Cluster: req.Cluster,
			Revision: req.Revision, Purpose: events.PurposePrune, Objects: res.Pruned, Count: res.PrunedCount,
		})
		if err != nil {
			return nil, err
		}
		return []cloudevents.Event{out}, nil
	case fault.IsPermanent(err):
		log.ErrorContext(ctx, "pruning what the commit no longer renders failed", "error", err)
		return nil, nil
	case ctx.Err() != nil:
		return nil, err // flotilla is stopping: the request is replayed at the next start
	case !r.now().Before(req.Deadline):
		log.ErrorContext(ctx, "pruning what the commit no longer renders: not done by its deadline", "deadline", req.Deadline, "error", err)
		return nil, nil
	}
	return nil, fmt.Errorf("pruning %s in cluster %s: %w", req.Application, req.Cluster, err)
}

// pruned is request e's cluster.pruned of p.
func (r *Runner) pruned(e cloudevents.Event, p events.ClusterPruned) (cloudevents.Event, error) {
	out, err := events.Derive(e, events.TypeClusterPruned, "", p)
	if err != nil {
		return out, err
	}
	out.SetSubject(p.Cluster)
	return out, nil
}

// announce journals request e's pipelinerun.started beside the run; the
// channel closes when that is done. A failure is logged: the event tells,
// nothing waits for it.
func (r *Runner) announce(ctx context.Context, e cloudevents.Event, req events.PipelineRunRequested) <-chan struct{} {
	done := make(chan struct{})
	if r.starts == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		out, err := events.Derive(e, events.TypePipelineRunStarted, "", events.PipelineRunStart{
			RolloutID: req.RolloutID, Wave: req.Wave, Cluster: req.Cluster, Purpose: req.Purpose, Step: req.Step, Image: req.Image,
		})
		if err == nil {
			out.SetSubject(req.Cluster)
			// Bounded: the answer waits for this, and must not wait on a
			// journal that hangs longer than a run could.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
			_, err = r.starts.Append(actx, out)
			cancel()
		}
		if err != nil {
			r.log.WarnContext(ctx, "journaling the pipeline run's start", "rollout_id", req.RolloutID, "cluster", req.Cluster, "step", req.Step, "error", err)
		}
	}()
	return done
}

// answerID is the id of the answer to request e.
func answerID(e cloudevents.Event) string { return e.ID() + "/" + events.TypePipelineRunFinished }

func (r *Runner) finish(e cloudevents.Event, f events.PipelineRunFinished) ([]cloudevents.Event, error) {
	out, err := events.Derive(e, events.TypePipelineRunFinished, "", f)
	if err == nil && out.ID() != answerID(e) {
		err = fmt.Errorf("the answer to %s has id %s, not %s", e.ID(), out.ID(), answerID(e))
	}
	if err != nil {
		return nil, err
	}
	out.SetSubject(f.Cluster)
	return []cloudevents.Event{out}, nil
}

// keyedLock is a mutex per key, made on first use and dropped when no one
// holds or waits for it; waiting ends with the caller's context.
type keyedLock struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	held  chan struct{} // a token while held
	users int           // holders and waiters
}

// lock takes key's lock, waiting until it is free or ctx ends; the
// function returned releases it.
func (k *keyedLock) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{held: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("waiting for the run in flight on %s: %w", key, ctx.Err())
	}
}
