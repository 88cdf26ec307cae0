package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// Rollouts is the rollout state plan needs (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	Create(ctx context.Context, ro rollout.Rollout) (bool, error)
	App(ctx context.Context, name string) (rollout.AppState, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// Function is the plan function.
type Function struct {
	cfg  *config.Config
	repo Rollouts
}

// New returns plan over the applications and waves of cfg.
func New(cfg *config.Config, repo Rollouts) *Function { return &Function{cfg: cfg, repo: repo} }

func (*Function) Name() string       { return "plan" }
func (*Function) Consumes() []string { return []string{events.TypeImageVerified} }

// Handle plans rollouts for one verified image.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	v, err := events.Decode[events.ImageVerified](e)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	for _, app := range f.cfg.Applications {
		if !registry.SameRepository(app.Image, v.Image) {
			continue
		}
		evs, err := f.planApp(ctx, e, v, app)
		if err != nil {
			return nil, fmt.Errorf("planning %s: %w", app.Name, err)
		}
		out = append(out, evs...)
	}
	return out, nil
}

// ID derives a rollout id from the event and application, so a redelivered
// event finds the rollout it already started.
func ID(eventID, app string) string {
	h := sha256.Sum256([]byte(eventID + "\x00" + app))
	return app + "-" + hex.EncodeToString(h[:])[:10]
}

func (f *Function) planApp(ctx context.Context, e cloudevents.Event, v events.ImageVerified, app config.Application) ([]cloudevents.Event, error) {
	id := ID(e.ID(), app.Name)
	ro, err := f.repo.Get(ctx, id)
	if err == nil && ro.Phase.Done() {
		// A redelivery after the dedupe window (the journal forgot the
		// event's id): the rollout it started has finished; say so, start
		// nothing.
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name, events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag,
			Reason: fmt.Sprintf("this push was delivered before: its rollout %s has finished (%s)", ro.ID, ro.Phase)})
		return []cloudevents.Event{skip}, err
	}
	if err == nil {
		return started(e, ro) // redelivery: emit the same events again (the journal drops them)
	}
	if !errors.Is(err, rollout.ErrNotFound) {
		return nil, err
	}
	st, err := f.repo.App(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	d, err := versionpolicy.Decide(versionpolicy.Track(app.Track), st.LatestTag, v.Tag)
	if err != nil {
		return nil, err
	}
	if !d.Accept {
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name,
			events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag, Reason: d.Reason})
		return []cloudevents.Event{skip}, err
	}
	ro = rollout.Rollout{ID: id, Application: app.Name, Image: v.Image, Tag: v.Tag, Digest: v.Digest, Phase: rollout.Progressing}
	ro.Waves = waves(f.cfg, app)
	if len(ro.Waves) == 0 { // config validation refuses it; a config changed under a running flotilla
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name,
			events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag, Reason: "the application targets no cluster of the fleet"})
		return []cloudevents.Event{skip}, err
	}
	if _, err := f.repo.Create(ctx, ro); err != nil {
		return nil, err
	}
	if err := f.repo.UpdateApp(ctx, app.Name, func(st *rollout.AppState) error {
		st.LatestTag, st.LatestRollout = v.Tag, id
		return nil
	}); err != nil {
		return nil, err
	}
	return started(e, ro)
}

func started(e cloudevents.Event, ro rollout.Rollout) ([]cloudevents.Event, error) {
	var waves [][]string
	for _, w := range ro.Waves {
		var names []string
		for _, c := range w.Clusters {
			names = append(names, c.Name)
		}
		waves = append(waves, names)
	}
	e = e.Clone()
	e.SetExtension(events.ExtRolloutID, ro.ID)
	s, err := events.Derive(e, events.TypeRolloutStarted, ro.Application, events.RolloutStarted{
		RolloutID: ro.ID, Application: ro.Application, Image: ro.Image, Tag: ro.Tag, Digest: ro.Digest, Waves: waves,
	})
	if err != nil {
		return nil, err
	}
	w, err := events.Derive(e, events.TypeWaveStarted, ro.Application, events.WaveStarted{RolloutID: ro.ID, Wave: 0, Clusters: waves[0]})
	return []cloudevents.Event{s, w}, err
}

// waves are the fleet's waves as app's rollout runs them: only the clusters
// app targets (a wave left with none is skipped), each wave's policy scaled
// to its clusters.
func waves(cfg *config.Config, app config.Application) []rollout.Wave {
	var out []rollout.Wave
	for _, w := range cfg.Fleet.Waves {
		wave := rollout.Wave{Name: w.Name}
		for _, name := range w.ClusterNames() {
			if c, ok := cfg.Cluster(name); ok && !app.Targets(c) {
				continue
			}
			wave.Clusters = append(wave.Clusters, rollout.Cluster{Name: name, Phase: rollout.ClusterPending})
		}
		if len(wave.Clusters) == 0 {
			continue
		}
		policy := w.Policy(cfg.Fleet.WavePolicy)
		wave.MaxParallel, wave.MaxFailures = policy.Limits(len(wave.Clusters))
		wave.BakeTime = policy.Bake()
		out = append(out, wave)
	}
	return out
}
