package observe

import (
	"context"
	"errors"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/launch"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Function is the observe function.
type Function struct {
	cfg    *config.Config
	repo   *rollout.Repo
	status launch.StatusReader
}

// New returns observe.
func New(cfg *config.Config, repo *rollout.Repo, status launch.StatusReader) *Function {
	return &Function{cfg: cfg, repo: repo, status: status}
}

func (*Function) Name() string       { return "observe" }
func (*Function) Consumes() []string { return []string{events.TypeCanary} }

// Handle classifies one canary event.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
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
	st, err := f.status.CanaryStatus(ctx, c.Cluster, app.Namespace, app.Workload)
	if err != nil {
		return nil, err
	}
	var typ, reason string
	ro, err = f.repo.Update(ctx, ro.ID, func(r *rollout.Rollout) error {
		cl, _, err := r.Cluster(c.Cluster)
		if err != nil {
			return events.Permanent(err)
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
func classify(r *rollout.Rollout, cl *rollout.Cluster, c events.Canary, st cluster.CanaryStatus) (typ, reason string) {
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
	case rollout.ClusterReverting:
		// Whatever Flagger says, the revert is done when both workloads run
		// the previous image and no analysis is under way.
		if st.Settled() && primary == cl.PreviousImage && target == cl.PreviousImage {
			return events.TypeClusterReverted, c.Message
		}
	}
	return "", ""
}
