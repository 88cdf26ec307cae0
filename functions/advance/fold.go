package advance

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// HandleFolded records a burst of one rollout's cluster results in one
// update of the rollout, in order, as Handle would one after the other:
// a wave of 1,000 clusters succeeds in a burst (observe folds Flagger's
// events into one update that reports every cluster it settled), and one
// update each rewrote the rollout a thousand times. It stops at the first
// event of another kind, of another rollout, or one it cannot read; those
// are handled alone (a dispatch.Folder).
func (f *Function) HandleFolded(ctx context.Context, es []cloudevents.Event) ([][]cloudevents.Event, error) {
	var results []events.ClusterResult
	for _, e := range es {
		if t := e.Type(); t != events.TypeClusterSucceeded && t != events.TypeClusterFailed {
			break
		}
		res, err := events.Decode[events.ClusterResult](e)
		if err != nil || len(results) > 0 && res.RolloutID != results[0].RolloutID {
			break
		}
		results = append(results, res)
	}
	if len(results) == 0 {
		return nil, nil
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	out := make([][]cloudevents.Event, len(results))
	ro, all, err := f.repo.UpdateEmit(ctx, results[0].RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		var all []cloudevents.Event
		for i, res := range results {
			o, err := f.record(r, es[i], res, fleet)
			if err != nil {
				return nil, err
			}
			out[i] = o
			all = append(all, o...)
		}
		return all, nil
	})
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		// A finished rollout's late results change nothing and emit
		// nothing (what was derived was of a copy).
		clear(out)
	}
	return out, f.deployed(ctx, ro)
}
