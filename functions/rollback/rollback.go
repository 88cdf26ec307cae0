package rollback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// StatusReader reads a canary's live state (pkg/cluster.Set, in production).
type StatusReader interface {
	CanaryStatus(ctx context.Context, cluster, namespace string, workload config.Workload) (rollout.CanaryStatus, error)
}

// statusTimeout bounds one read of a cluster.
const statusTimeout = 10 * time.Second

// Rollouts is the rollout state rollback needs (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	App(ctx context.Context, name string) (rollout.AppState, error)
}

// Function is the rollback function.
type Function struct {
	cfg    *config.Config
	repo   Rollouts
	status StatusReader
	now    func() time.Time
}

// New returns rollback; now defaults to time.Now.
func New(cfg *config.Config, repo Rollouts, status StatusReader, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, status: status, now: now}
}

func (*Function) Name() string { return "rollback" }
func (*Function) Consumes() []string {
	return []string{
		events.TypeRolloutFailed, events.TypeClusterReverted, events.TypeClusterApplied,
		events.TypePipelineRunFinished, events.TypeClusterDeadline, events.TypeRolloutRetryRequested,
	}
}

// Handle starts, continues or retries the rollback of one rollout.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	var (
		id     string
		mark   func(*rollout.Rollout) ([]cloudevents.Event, error)
		err    error
		prefix []cloudevents.Event
	)
	switch e.Type() {
	case events.TypeRolloutFailed:
		r, err := events.Decode[events.RolloutResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
	case events.TypeClusterReverted:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return nil, err
		}
		id, mark = r.RolloutID, markCluster(r.Cluster, rollout.ClusterReverting, rollout.ClusterReverted, r.Reason)
	case events.TypeClusterApplied:
		r, err := events.Decode[events.ClusterResult](e)
		if err != nil {
			return nil, err
		}
		id = r.RolloutID
	case events.TypePipelineRunFinished:
		id, mark, prefix, err = f.finished(ctx, e)
	case events.TypeClusterDeadline:
		id, mark, prefix, err = f.deadline(ctx, e)
	case events.TypeRolloutRetryRequested:
		r, err := events.Decode[events.RolloutRetryRequested](e)
		if err != nil {
			return nil, err
		}
		id, mark = r.RolloutID, f.retry(e, r)
	}
	if err != nil || id == "" {
		return nil, err
	}
	out, err := f.next(ctx, e, id, mark)
	return append(prefix, out...), err
}

// markCluster moves a cluster from phase `from` to `to`.
func markCluster(name string, from, to rollout.ClusterPhase, msg string) func(*rollout.Rollout) ([]cloudevents.Event, error) {
	return func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
		c, _, err := ro.Cluster(name)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if c.Phase == from {
			c.Phase, c.Message, c.Run = to, msg, ""
		}
		return nil, nil
	}
}

// readStatus reads a cluster's canary under statusTimeout.
func (f *Function) readStatus(ctx context.Context, ro rollout.Rollout, clusterName string) (rollout.CanaryStatus, error) {
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return rollout.CanaryStatus{}, fault.Permanent(fmt.Errorf("application %q is no longer configured", ro.Application))
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	return f.status.CanaryStatus(ctx, clusterName, app.Namespace, app.Workload)
}

// reverted tells whether a cluster is back on prev with no analysis under
// way. Flagger treats a return to the last promoted spec as a manual
// rollback and reports nothing, so this read is often the only news.
func reverted(st rollout.CanaryStatus, prev string) bool {
	return st.Settled() && st.PrimaryImage == prev && st.TargetImage == prev
}

// finished handles a revert run's end: failed, the cluster's revert
// failed; applied, the cluster is reverted if it is back on its previous
// image already, else observe reports it when Flagger is done.
func (f *Function) finished(ctx context.Context, e cloudevents.Event) (string, func(*rollout.Rollout) ([]cloudevents.Event, error), []cloudevents.Event, error) {
	run, err := events.Decode[events.PipelineRunFinished](e)
	if err != nil || run.Purpose != events.PurposeRevert {
		return "", nil, nil, err
	}
	ro, err := f.repo.Get(ctx, run.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, err
	}
	var back bool
	if run.Error == "" {
		st, err := f.readStatus(ctx, ro, run.Cluster)
		back = err == nil && reverted(st, run.Image)
	}
	mark := func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		c, _, err := r.Cluster(run.Cluster)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if c.Step != run.Step || c.Run != events.PurposeRevert || c.Phase != rollout.ClusterReverting {
			return nil, nil
		}
		c.Run = ""
		switch {
		case run.Error != "":
			c.Phase, c.Message = rollout.ClusterRevertFailed, "revert failed: "+run.Error
		case back:
			c.Phase, c.Message = rollout.ClusterReverted, "previous image restored"
		default:
			c.Applied = f.now().UTC()
		}
		return nil, nil
	}
	return run.RolloutID, mark, nil, nil
}

// deadline handles a revert's deadline: the cluster is read; back on its
// previous image it is reverted, else its revert failed.
func (f *Function) deadline(ctx context.Context, e cloudevents.Event) (string, func(*rollout.Rollout) ([]cloudevents.Event, error), []cloudevents.Event, error) {
	d, err := events.Decode[events.ClusterDeadline](e)
	if err != nil || d.Purpose != events.PurposeRevert {
		return "", nil, nil, err
	}
	ro, err := f.repo.Get(ctx, d.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return "", nil, nil, nil
	}
	if err != nil {
		return "", nil, nil, err
	}
	c, _, err := ro.Cluster(d.Cluster)
	if err != nil || c.Step != d.Step || c.Phase != rollout.ClusterReverting {
		return "", nil, nil, nil //nolint:nilerr // a step done, or a cluster the rollout does not have
	}
	st, readErr := f.readStatus(ctx, ro, d.Cluster)
	mark := func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		c, _, err := r.Cluster(d.Cluster)
		if err != nil {
			return nil, fault.Permanent(err)
		}
		if c.Step != d.Step || c.Phase != rollout.ClusterReverting {
			return nil, nil
		}
		c.Run = ""
		switch {
		case readErr != nil:
			c.Phase, c.Message = rollout.ClusterRevertFailed, "revert not done by its deadline: the cluster cannot be read: "+readErr.Error()
		case reverted(st, c.PreviousImage):
			c.Phase, c.Message = rollout.ClusterReverted, "previous image restored (read at the deadline)"
		default:
			c.Phase, c.Message = rollout.ClusterRevertFailed, fmt.Sprintf(
				"revert not done by its deadline: primary runs %s, workload %s, Flagger phase %q", st.PrimaryImage, st.TargetImage, st.Phase)
		}
		return nil, nil
	}
	return d.RolloutID, mark, nil, nil
}

// retry turns a rollback that failed back into one under way: the clusters
// whose revert failed (or the one named) are reverted again, and the
// events functions gave up on are replayed.
func (f *Function) retry(e cloudevents.Event, req events.RolloutRetryRequested) func(*rollout.Rollout) ([]cloudevents.Event, error) {
	return func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		r.Retries = max(r.Retries, req.Attempt)
		var out []cloudevents.Event
		for i := range r.Failures {
			x := &r.Failures[i]
			if x.Retried || (req.Cluster != "" && x.Cluster != req.Cluster) {
				continue
			}
			x.Retried = true
			ev, err := replay(e, *x)
			if err != nil {
				return nil, err
			}
			if ev != nil {
				out = append(out, *ev)
			}
		}
		if r.Phase != rollout.RollbackFailed {
			return out, nil
		}
		for _, c := range r.InPhase(rollout.ClusterRevertFailed) {
			if req.Cluster == "" || c.Name == req.Cluster {
				c.Phase, c.Message = rollout.ClusterFailed, "revert retried"
			}
		}
		r.Phase = rollout.Failed
		return out, nil
	}
}

// replay re-issues an event a function gave up on, from the rollout's copy,
// under a new id (the journal would drop the old one).
func replay(cause cloudevents.Event, x rollout.Failure) (*cloudevents.Event, error) {
	if len(x.Event) == 0 || x.EventType == events.TypePipelineRunRequested {
		// A run request is not replayed: its step's time is up. The
		// cluster's revert is requested anew, with a new deadline.
		return nil, nil
	}
	ev, err := events.FailedEvent(events.FunctionFailed{EventID: x.EventID, Event: x.Event})
	if err != nil {
		return nil, err
	}
	ev.SetID(x.EventID + "/retry/" + cause.ID())
	return &ev, nil
}

// next reverts the newest wave that still has clusters on the new digest, or
// ends the rollback when none is left and nothing is under way: RolledBack,
// or RollbackFailed when some revert failed. mark, when set, first records
// what the event says, in the same transaction.
func (f *Function) next(ctx context.Context, e cloudevents.Event, id string, mark func(*rollout.Rollout) ([]cloudevents.Event, error)) ([]cloudevents.Event, error) {
	ro, err := f.repo.Get(ctx, id)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	app, ok := f.cfg.Application(ro.Application)
	if !ok {
		return nil, fault.Permanent(fmt.Errorf("rollout %s: application %q is no longer configured", ro.ID, ro.Application))
	}
	prevTag, err := f.previousTag(ctx, app)
	if err != nil {
		return nil, err
	}
	// The requests, and the end of the rollback, are journaled with the
	// state change, so a crash can neither lose nor repeat a step.
	_, out, err := f.repo.UpdateEmit(ctx, id, func(ro *rollout.Rollout) ([]cloudevents.Event, error) {
		var out []cloudevents.Event
		if mark != nil {
			var err error
			if out, err = mark(ro); err != nil {
				return nil, err
			}
		}
		if ro.Phase != rollout.Failed {
			return out, nil
		}
		if waves := toRevertNow(ro); len(waves) > 0 {
			deadline := f.now().UTC().Add(app.Delivery.StepDeadline())
			for _, wave := range waves {
				images, tags := map[string]string{}, map[string]string{}
				for _, name := range ro.ToRevert(wave) {
					c, _, _ := ro.Cluster(name)
					c.Phase = rollout.ClusterReverting
					evs, err := ro.RequestRun(e, c, events.PurposeRevert, c.PreviousImage, prevTag(c.PreviousImage), deadline)
					if err != nil {
						return nil, err
					}
					out = append(out, evs...)
					images[name] = c.PreviousImage
					if t := prevTag(c.PreviousImage); t != "" {
						tags[name] = t
					}
				}
				pr, err := f.revertPullRequest(e, ro, app, wave, images, tags)
				if err != nil {
					return nil, err
				}
				out = append(out, pr...)
			}
			return out, nil
		}
		for w := range ro.Waves {
			if ro.Reverting(w) {
				return out, nil // wait for the wave being reverted
			}
		}
		if len(ro.Running(events.PurposeApply)) > 0 {
			return out, nil // a cluster may still take the digest: its run's end says
		}
		typ := events.TypeRolloutRolledBack
		ro.Phase = rollout.RolledBack
		if failed := ro.InPhase(rollout.ClusterRevertFailed); len(failed) > 0 {
			typ, ro.Phase = events.TypeRolloutRollbackFailed, rollout.RollbackFailed
			var s []string
			for _, c := range failed {
				s = append(s, fmt.Sprintf("cluster %s: %s", c.Name, c.Message))
			}
			ro.Reason = strings.TrimSuffix(strings.SplitN(ro.Reason, "; rollback failed: ", 2)[0], "; ") + "; rollback failed: " + strings.Join(s, "; ")
		}
		done, err := events.Derive(e, typ, id, events.RolloutResult{RolloutID: id, Reason: ro.Reason})
		if err != nil {
			return nil, err
		}
		return append(out, done), nil
	})
	return out, err
}

// toRevertNow lists the waves whose clusters are reverted now. The
// rollback goes wave by wave, newest first, each wave once the newer ones
// are back: with no wave being reverted, the newest that took the digest.
// While one is, only clusters of that wave or a newer one that took the
// digest late (their apply ended after the rollback began): they do not
// wait for their wave's other reverts.
func toRevertNow(ro *rollout.Rollout) []int {
	cur := -1
	for w := range ro.Waves {
		if ro.Reverting(w) {
			cur = w
		}
	}
	if cur < 0 {
		if w := ro.RevertWave(len(ro.Waves) - 1); w >= 0 {
			return []int{w}
		}
		return nil
	}
	var out []int
	for w := len(ro.Waves) - 1; w >= cur; w-- {
		if len(ro.ToRevert(w)) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// previousTag returns, for an image a cluster ran before, its tag when it is
// the digest the fleet last converged on (so a GitOps repository gets the
// version's tag back with its digest), else "".
func (f *Function) previousTag(ctx context.Context, app config.Application) (func(image string) string, error) {
	none := func(string) string { return "" }
	if app.GitOps == nil {
		return none, nil
	}
	st, err := f.repo.App(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	if st.DeployedDigest == "" || st.DeployedTag == "" {
		return none, nil
	}
	return func(image string) string {
		if strings.HasSuffix(image, "@"+st.DeployedDigest) {
			return st.DeployedTag
		}
		return ""
	}, nil
}

// revertPullRequest asks, for a GitOps application in mode pullRequest
// whose wave's pull request was merged, for a pull request writing each
// cluster's previous image back (merged automatically where the host can).
// The live reverts do not wait for it.
func (f *Function) revertPullRequest(e cloudevents.Event, ro *rollout.Rollout, app config.Application, wave int, images, tags map[string]string) ([]cloudevents.Event, error) {
	g := app.GitOps
	w := &ro.Waves[wave]
	if g == nil || g.Mode != config.GitOpsModePullRequest || g.PullRequest == nil || g.PullRequest.Revert != config.GitOpsModePullRequest ||
		w.PullRequest == nil || w.PullRequest.State != rollout.PullRequestMerged || w.RevertPullRequest != nil {
		return nil, nil
	}
	deadline := f.now().UTC().Add(g.PullRequest.MergeDeadline.Duration)
	w.RevertPullRequest = &rollout.PullRequest{State: rollout.PullRequestRequested, Deadline: deadline, Updated: f.now().UTC()}
	req, err := events.Derive(e, events.TypePullRequestRequested, fmt.Sprintf("%d/%s/open", wave, events.PurposeRevert), events.PullRequestRequested{
		RolloutID: ro.ID, Application: ro.Application, Wave: wave, Purpose: events.PurposeRevert, Op: events.PullRequestOpen,
		Images: images, Tags: tags, Deadline: deadline,
	})
	if err != nil {
		return nil, err
	}
	return []cloudevents.Event{req}, nil
}
