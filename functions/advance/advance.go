package advance

import (
	"context"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Rollouts is the rollout state advance needs (pkg/state).
type Rollouts interface {
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// Function is the advance function.
type Function struct {
	repo Rollouts
}

// New returns advance.
func New(repo Rollouts) *Function { return &Function{repo: repo} }

func (*Function) Name() string { return "advance" }
func (*Function) Consumes() []string {
	return []string{events.TypeClusterSucceeded, events.TypeClusterFailed}
}

type step struct {
	typ     string
	payload any
}

// Handle records one cluster result and moves the rollout on.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	res, err := events.Decode[events.ClusterResult](e)
	if err != nil {
		return nil, err
	}
	ro, out, err := f.repo.UpdateEmit(ctx, res.RolloutID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		cl, w, err := r.Cluster(res.Cluster)
		if err != nil {
			return nil, events.Permanent(err)
		}
		if r.Phase != rollout.Progressing {
			return nil, nil
		}
		switch e.Type() {
		case events.TypeClusterSucceeded:
			cl.Phase = rollout.ClusterSucceeded
		case events.TypeClusterFailed:
			cl.Phase = rollout.ClusterFailed
		}
		cl.Message = res.Reason
		if w != r.Wave {
			return nil, nil
		}
		steps := decide(r)
		out := make([]cloudevents.Event, 0, len(steps))
		for _, s := range steps {
			ev, err := events.Derive(e, s.typ, r.ID, s.payload)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	if ro.Phase == rollout.Succeeded {
		// Idempotent, so a redelivery that finds the rollout done repeats it.
		if err := f.repo.UpdateApp(ctx, ro.Application, func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest = ro.Tag, ro.Digest
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decide moves r on after a cluster result in its current wave; it returns the
// events of the transition (none while the wave is still running).
func decide(r *rollout.Rollout) []step {
	w := r.Wave
	wave := r.Waves[w]
	done, failed := r.WaveOutcome(w)
	if failed > wave.MaxFailures {
		r.Phase = rollout.Failed
		r.Reason = fmt.Sprintf("wave %d (%s): %s", w+1, wave.Name, failures(r, w))
		if wave.MaxFailures > 0 {
			r.Reason += fmt.Sprintf(" (more than its failure budget of %d)", wave.MaxFailures)
		}
		return []step{{events.TypeRolloutFailed, events.RolloutResult{RolloutID: r.ID, Reason: r.Reason}}}
	}
	if !done {
		if pending := wave.Pending(); wave.MaxParallel > 0 && len(pending) > 0 && wave.Room() > 0 {
			return []step{{events.TypeWaveContinued, events.WaveStarted{RolloutID: r.ID, Wave: w, Clusters: pending}}}
		}
		return nil
	}
	if failed > 0 {
		note := fmt.Sprintf("wave %d (%s) within its failure budget of %d: %s", w+1, wave.Name, wave.MaxFailures, failures(r, w))
		if r.Reason != "" {
			note = r.Reason + "; " + note
		}
		r.Reason = note
	}
	steps := []step{{events.TypeWaveSucceeded, events.WaveResult{RolloutID: r.ID, Wave: w}}}
	if w+1 < len(r.Waves) {
		r.Wave = w + 1
		var names []string
		for _, c := range r.Waves[r.Wave].Clusters {
			names = append(names, c.Name)
		}
		return append(steps, step{events.TypeWaveStarted, events.WaveStarted{RolloutID: r.ID, Wave: r.Wave, Clusters: names}})
	}
	r.Phase = rollout.Succeeded
	return append(steps, step{events.TypeRolloutSucceeded, events.RolloutResult{RolloutID: r.ID}})
}

func failures(r *rollout.Rollout, w int) string {
	s := ""
	for _, c := range r.Waves[w].Clusters {
		if c.Phase == rollout.ClusterFailed {
			if s != "" {
				s += "; "
			}
			s += fmt.Sprintf("cluster %s failed: %s", c.Name, c.Message)
		}
	}
	return s
}
