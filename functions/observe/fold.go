package observe

import (
	"context"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// HandleFolded handles a burst of one rollout's canary events and apply
// runs' ends in one update of the rollout, in order, as Handle would one
// after the other: a wave of 1,000 clusters sends thousands (Flagger's
// progress of each canary, each cluster's apply) and one update each
// rewrites the rollout thousands of times. It stops at the first event of
// another kind, or one it cannot read; those are handled alone.
func (f *Function) HandleFolded(ctx context.Context, es []cloudevents.Event) ([][]cloudevents.Event, error) {
	id := events.RolloutID(es[0])
	if id == "" {
		return nil, nil
	}
	ro, err := f.repo.Get(ctx, id)
	if err != nil {
		return nil, err // handled alone, each as Handle does
	}
	var changes []change
	for _, e := range es {
		ch, ok := f.foldable(ctx, ro, e)
		if !ok {
			break
		}
		changes = append(changes, ch)
	}
	if len(changes) == 0 {
		return nil, nil
	}
	out := make([][]cloudevents.Event, len(changes))
	_, all, err := f.repo.UpdateEmit(ctx, id, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		var all []cloudevents.Event
		for i, ch := range changes {
			out[i] = nil
			if ch == nil {
				continue
			}
			o, err := ch(r)
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
		// A finished rollout's late events change nothing and emit nothing.
		clear(out)
	}
	return out, nil
}

// foldable reads what event e of rollout ro needs, for an update with the
// rest of its burst: its change (nil: none), and false for an event
// handled alone (another kind, another rollout, or one that cannot be
// read: Handle says why).
func (f *Function) foldable(ctx context.Context, ro rollout.Rollout, e cloudevents.Event) (change, bool) {
	switch e.Type() {
	case events.TypeCanary:
		c, err := events.Decode[events.Canary](e)
		if err != nil || c.RolloutID != ro.ID {
			return nil, false
		}
		ch, err := f.canaryChange(ctx, ro, e, c)
		return ch, err == nil
	case events.TypePipelineRunFinished:
		run, err := events.Decode[events.PipelineRunFinished](e)
		if err != nil || run.RolloutID != ro.ID {
			return nil, false
		}
		if run.Purpose != events.PurposeApply {
			return nil, true
		}
		return f.finishedChange(ctx, ro, e, run), true
	}
	return nil, false
}
