package observe

import (
	"context"
	"sync"

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
	changes := f.foldChanges(ctx, ro, es)
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

// foldReads bounds the reads of clusters one burst makes at once. Reading
// a canary whose watch cache is behind its event is a round trip to the
// cluster's API server; a burst of a 1,000-cluster wave read one after the
// other kept observe busy for most of the wave's start (BENCHMARKS.md, "One
// wave of 1,000 clusters").
const foldReads = 16

// foldChanges reads what each event of burst es needs, up to foldReads at
// once, and returns the changes of the events before the first one handled
// alone, in order.
func (f *Function) foldChanges(ctx context.Context, ro rollout.Rollout, es []cloudevents.Event) []change {
	for i, e := range es {
		if t := e.Type(); t != events.TypeCanary && t != events.TypePipelineRunFinished {
			es = es[:i] // handled alone: nothing after it is read
			break
		}
	}
	type read struct {
		ch change
		ok bool
	}
	reads := make([]read, len(es))
	slots := make(chan struct{}, foldReads)
	var wg sync.WaitGroup
	for i, e := range es {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ch, ok := f.foldable(ctx, ro, e)
			reads[i] = read{ch, ok}
		})
	}
	wg.Wait()
	var changes []change
	for _, r := range reads {
		if !r.ok {
			break
		}
		changes = append(changes, r.ch)
	}
	return changes
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
