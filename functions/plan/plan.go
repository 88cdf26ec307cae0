package plan

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/registry"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// Rollouts is the rollout state plan needs (pkg/state).
type Rollouts interface {
	Get(ctx context.Context, id string) (rollout.Rollout, error)
	Create(ctx context.Context, ro rollout.Rollout) (bool, error)
	UpdateEmit(ctx context.Context, id string, fn func(*rollout.Rollout) ([]cloudevents.Event, error)) (rollout.Rollout, []cloudevents.Event, error)
	ListInFlight(ctx context.Context) ([]rollout.Rollout, error)
	Fleet(ctx context.Context) (rollout.FleetState, error)
	App(ctx context.Context, name string) (rollout.AppState, error)
	UpdateApp(ctx context.Context, name string, fn func(*rollout.AppState) error) error
}

// Function is the plan function.
type Function struct {
	cfg  *config.Config
	repo Rollouts
	now  func() time.Time
}

// New returns plan over the applications and waves of cfg.
func New(cfg *config.Config, repo Rollouts) *Function {
	return &Function{cfg: cfg, repo: repo, now: time.Now}
}

// WithClock has plan read the time from now (default time.Now).
func (f *Function) WithClock(now func() time.Time) *Function {
	f.now = now
	return f
}

func (*Function) Name() string { return "plan" }
func (*Function) Consumes() []string {
	return []string{events.TypeImageVerified, events.TypeGitVerified, events.TypeRolloutSucceeded, events.TypeRolloutRolledBack, events.TypeRolloutSuperseded,
		events.TypeVersionQuarantineRequested, events.TypeRolloutRollbackRequested}
}

// Handle plans rollouts for one verified image, or starts the rollout
// queued behind one that ended.
func (f *Function) Handle(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	switch e.Type() {
	case events.TypeVersionQuarantineRequested:
		return f.quarantine(ctx, e)
	case events.TypeRolloutRollbackRequested:
		return f.rollBack(ctx, e)
	case events.TypeGitVerified:
		return f.gitVerified(ctx, e)
	case events.TypeImageVerified:
	default:
		return f.dequeue(ctx, e)
	}
	v, err := events.Decode[events.ImageVerified](e)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	for _, app := range f.cfg.Applications {
		if !registry.SameRepository(app.Image, v.Image) {
			continue
		}
		evs, err := f.planApp(ctx, e, v, app, nil)
		if err != nil {
			return nil, fmt.Errorf("planning %s: %w", app.Name, err)
		}
		out = append(out, evs...)
	}
	return out, nil
}

// gitVerified plans rollouts of a verified commit for the applications it
// names. A git application's version is the commit: the image of its
// rollouts is the repository (without credentials), the digest the commit
// and the tag branch@abbrev or the git tag.
func (f *Function) gitVerified(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	v, err := events.Decode[events.GitVerified](e)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	for _, name := range v.Applications {
		app, ok := f.cfg.Application(name)
		if !ok || app.Git() == nil {
			continue // the configuration changed since verify
		}
		iv := events.ImageVerified{Image: gitops.DisplayURL(app.Git().URL), Tag: v.Version(), Digest: v.Commit}
		var only []string
		if cs, ok := v.Clusters[name]; ok {
			only = cs
		}
		evs, err := f.planApp(ctx, e, iv, app, only)
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

// planApp plans v's rollout to app's clusters; only, when set, limits it
// to those clusters (a git push that changed what only they render) and
// to the clusters of the app's rollouts in flight, which it takes over.
func (f *Function) planApp(ctx context.Context, e cloudevents.Event, v events.ImageVerified, app config.Application, only []string) ([]cloudevents.Event, error) {
	id := ID(e.ID(), app.Name)
	ro, err := f.repo.Get(ctx, id)
	if err == nil && ro.Phase == rollout.Queued {
		return nil, nil // a redelivery: it waits already
	}
	if err == nil && ro.Phase.Done() {
		// A redelivery after the dedupe window (the journal forgot the
		// event's id): the rollout it started has finished; say so, start
		// nothing.
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name, events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag,
			Reason: fmt.Sprintf("this push was delivered before: its rollout %s has finished (%s)", ro.ID, ro.Phase)})
		return []cloudevents.Event{skip}, err
	}
	if err == nil {
		return f.start(ctx, e, ro.ID) // redelivery: the same events again (the journal drops them)
	}
	if !errors.Is(err, rollout.ErrNotFound) {
		return nil, err
	}
	st, err := f.repo.App(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	inFlight, err := f.inFlight(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	d, err := decide(app, st, inFlight, v)
	if err != nil {
		return nil, err
	}
	if !d.Accept {
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name,
			events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag, Reason: d.Reason})
		return []cloudevents.Event{skip}, err
	}
	ro = rollout.Rollout{ID: id, Application: app.Name, Image: v.Image, Tag: v.Tag, Digest: v.Digest, Phase: rollout.Progressing,
		PreviousTag: st.DeployedTag, PreviousDigest: st.DeployedDigest, ImageCreated: v.Created}
	ro.Waves = waves(f.cfg, app)
	if only != nil {
		ro.Waves = limitWaves(f.cfg, ro.Waves, only, inFlight)
	}
	if len(ro.Waves) == 0 { // config validation refuses it; a config changed under a running flotilla
		skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name,
			events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag, Reason: "the application targets no cluster of the fleet"})
		return []cloudevents.Event{skip}, err
	}
	ro.SignedBy = v.SignedBy[app.Name]
	if why, unsigned := v.Unsigned[app.Name]; unsigned {
		// An unsigned build goes only as far as the waves that take one.
		ro.Unsigned = why
		n := slices.IndexFunc(ro.Waves, func(w rollout.Wave) bool { return w.SignatureRequired })
		if n == 0 {
			skip, err := events.Derive(e, events.TypeRolloutSkipped, app.Name, events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag,
				Reason: fmt.Sprintf("no signature is trusted (%s) and wave %s requires one", why, ro.Waves[0].Name)})
			return []cloudevents.Event{skip}, err
		}
		if n > 0 {
			ro.Reason = fmt.Sprintf("unsigned: rolls out to the waves before %s, which requires a signature", ro.Waves[n].Name)
			ro.StopsBefore, ro.Waves = ro.Waves[n].Name, ro.Waves[:n]
		}
	}
	queue, out, err := f.makeWay(ctx, e, app, inFlight, ro)
	if err != nil {
		return nil, err
	}
	if queue {
		ro.Phase = rollout.Queued
	}
	if _, err := f.repo.Create(ctx, ro); err != nil {
		return nil, err
	}
	if err := f.repo.UpdateApp(ctx, app.Name, func(st *rollout.AppState) error {
		st.LatestTag, st.LatestRollout = v.Tag, id
		if queue {
			st.Queued = id
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if queue {
		q, err := derive(e, events.TypeRolloutQueued, ro, "waiting for the application's rollout in flight to end")
		return append(out, q), err
	}
	evs, err := f.start(ctx, e, ro.ID)
	return append(out, evs...), err
}

// start announces rollout id's start and starts what of its first wave may
// start, in one transaction: the runs are requested here, not a journal
// hop later by launch (wave.started announces the wave to followers).
func (f *Function) start(ctx context.Context, e cloudevents.Event, id string) ([]cloudevents.Event, error) {
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, id, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		return f.started(e, r, fleet)
	})
	return out, err
}

// started are the events that start r, caused by e: rollout.started,
// wave.started, and the runs of the first wave's clusters that may start,
// derived from wave.started as launch would.
func (f *Function) started(e cloudevents.Event, r *rollout.Rollout, fleet rollout.FleetState) ([]cloudevents.Event, error) {
	evs, err := started(e, *r)
	if err != nil || r.Phase != rollout.Progressing || r.Wave != 0 {
		return evs, err
	}
	app, ok := f.cfg.Application(r.Application)
	if !ok {
		return evs, nil // no longer configured: nothing starts
	}
	runs, err := r.Start(evs[1], rollout.GatesOf(f.cfg, app, fleet, f.now()))
	return append(evs, runs...), err
}

// makeWay decides what the new rollout ro does about the application's
// rollouts in flight: a queued one is superseded by it (only the newest
// waits); the one running is superseded by it (onNewVersion: supersede),
// or it queues behind it (queue, or a rollback under way, which is never
// cut short). It returns whether ro queues, and the events of the rollouts
// it superseded (journaled with their change).
func (f *Function) makeWay(ctx context.Context, e cloudevents.Event, app config.Application, inFlight []rollout.Rollout, ro rollout.Rollout) (bool, []cloudevents.Event, error) {
	var out []cloudevents.Event
	queue := false
	for _, cur := range inFlight {
		if cur.ID == ro.ID {
			continue
		}
		supersede := false
		switch {
		case cur.Phase == rollout.Queued:
			supersede, queue = true, true
		case cur.Phase == rollout.Failed:
			queue = true
		case cur.Phase == rollout.Progressing && app.OnNewVersion == config.OnNewVersionQueue:
			queue = true
		case cur.Phase == rollout.Progressing || cur.Phase == rollout.RollbackFailed:
			supersede = true
		}
		if supersede {
			evs, err := f.supersede(ctx, e, cur.ID, ro)
			if err != nil {
				return false, nil, err
			}
			out = append(out, evs...)
		}
	}
	return queue, out, nil
}

// supersede ends rollout id (running or queued) as Superseded by ro.
func (f *Function) supersede(ctx context.Context, e cloudevents.Event, id string, by rollout.Rollout) ([]cloudevents.Event, error) {
	_, out, err := f.repo.UpdateEmit(ctx, id, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase.Done() || r.Phase == rollout.Failed {
			return nil, nil
		}
		r.Phase = rollout.Superseded
		r.Reason = fmt.Sprintf("superseded by %s (%s)", by.Tag, by.ID)
		ev, err := derive(e, events.TypeRolloutSuperseded, *r, r.Reason)
		if err != nil {
			return nil, err
		}
		closes, err := r.ClosePullRequests(e, r.Reason, e.Time().UTC())
		return append([]cloudevents.Event{ev}, closes...), err
	})
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	return out, err
}

// derive is a rollout event of ro, caused by e.
func derive(e cloudevents.Event, typ string, ro rollout.Rollout, reason string) (cloudevents.Event, error) {
	e = e.Clone()
	e.SetExtension(events.ExtRolloutID, ro.ID)
	return events.Derive(e, typ, ro.ID, events.RolloutResult{RolloutID: ro.ID, Reason: reason})
}

// dequeue starts the rollout queued behind the one that ended with e.
func (f *Function) dequeue(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	res, err := events.Decode[events.RolloutResult](e)
	if err != nil {
		return nil, err
	}
	ended, err := f.repo.Get(ctx, res.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if ended.RollbackOf != "" && ended.Phase == rollout.RolledBack && ended.PreviousDigest != "" {
		// The fleet runs the version before the rolled back one again.
		if err := f.repo.UpdateApp(ctx, ended.Application, func(a *rollout.AppState) error {
			if a.DeployedDigest == ended.Digest {
				a.DeployedTag, a.DeployedDigest = ended.PreviousTag, ended.PreviousDigest
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	st, err := f.repo.App(ctx, ended.Application)
	if err != nil || st.Queued == "" || st.Queued == ended.ID {
		return nil, err
	}
	fleet, err := f.repo.Fleet(ctx)
	if err != nil {
		return nil, err
	}
	ro, out, err := f.repo.UpdateEmit(ctx, st.Queued, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase != rollout.Queued {
			return nil, nil
		}
		r.Phase = rollout.Progressing
		return f.started(e, r, fleet)
	})
	if errors.Is(err, rollout.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if err := f.repo.UpdateApp(ctx, ended.Application, func(a *rollout.AppState) error {
		if a.Queued == ro.ID {
			a.Queued = ""
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
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
		wave.Approvals = policy.Approvers()
		wave.SignatureRequired = app.Verify != nil && policy.SignatureRequired()
		out = append(out, wave)
	}
	return out
}

// limitWaves keeps of ws the clusters named by only or by a rollout in
// flight (a newer commit takes their change along), and the waves left
// with clusters; each wave's limits are computed again for its size.
func limitWaves(cfg *config.Config, ws []rollout.Wave, only []string, inFlight []rollout.Rollout) []rollout.Wave {
	keep := map[string]bool{}
	for _, n := range only {
		keep[n] = true
	}
	for _, cur := range inFlight {
		if cur.Phase == rollout.Progressing || cur.Phase == rollout.Queued {
			for _, w := range cur.Waves {
				for _, c := range w.Clusters {
					keep[c.Name] = true
				}
			}
		}
	}
	var out []rollout.Wave
	for _, w := range ws {
		w.Clusters = slices.DeleteFunc(slices.Clone(w.Clusters), func(c rollout.Cluster) bool { return !keep[c.Name] })
		if len(w.Clusters) == 0 {
			continue
		}
		for _, fw := range cfg.Fleet.Waves {
			if fw.Name == w.Name {
				w.MaxParallel, w.MaxFailures = fw.Policy(cfg.Fleet.WavePolicy).Limits(len(w.Clusters))
			}
		}
		out = append(out, w)
	}
	return out
}

// decide says whether v rolls out. The baseline is what the fleet last ran
// successfully (so a hotfix after a rolled back version is accepted), and
// the same tag pushed again with a new digest (a rebuild, a mutable tag
// moved) is a new version; v must also be newer than a rollout in flight
// or waiting, which it would take over.
func decide(app config.Application, st rollout.AppState, inFlight []rollout.Rollout, v events.ImageVerified) (versionpolicy.Decision, error) {
	if q, ok := st.QuarantineOf(v.Tag, v.Digest); ok {
		return versionpolicy.Decision{Reason: fmt.Sprintf("%s is quarantined (by %s: %s)", v.Tag, q.By, q.Reason)}, nil
	}
	if app.Git() != nil {
		return decideCommit(st, inFlight, v), nil
	}
	if p := app.DeniedBy(v.Tag); p != "" {
		return versionpolicy.Decision{Reason: fmt.Sprintf("%s matches the application's denyTags pattern %q", v.Tag, p)}, nil
	}
	policy := versionpolicy.Policy{Track: versionpolicy.Track(app.Track), Constraint: app.Semver, PreReleases: app.PreReleases}
	if f := app.TagFilter; f != nil {
		re, err := f.Regexp()
		if err != nil {
			return versionpolicy.Decision{}, fault.Permanent(fmt.Errorf("application %s: tag filter: %w", app.Name, err))
		}
		policy.Filter, policy.Extract = re, f.Extract
	}
	d, err := policy.Decide(st.DeployedTag, v.Tag)
	if err != nil {
		return d, err
	}
	if policy.Track == versionpolicy.Newest && d.Accept && builtBefore(v.Created, st.DeployedCreated) {
		return versionpolicy.Decision{Reason: fmt.Sprintf("%s was built at %s, before the deployed %s (%s); track Newest follows when images were built",
			v.Tag, v.Created.Format(time.RFC3339), st.DeployedTag, st.DeployedCreated.Format(time.RFC3339))}, nil
	}
	if !d.Accept && v.Tag == st.DeployedTag && v.Digest != "" && v.Digest != st.DeployedDigest {
		d = versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf("%s was pushed again with a new digest", v.Tag)}
	}
	if !d.Accept {
		return d, nil
	}
	for _, cur := range inFlight {
		if cur.Phase != rollout.Progressing && cur.Phase != rollout.Queued {
			continue // failing: a failed version is no baseline
		}
		switch {
		case cur.Tag == v.Tag && cur.Digest == v.Digest && cur.StopsBefore != "" && v.SignedBy[app.Name] != "":
			// Signed since its unsigned rollout started: this one takes
			// the version on to the waves that require a signature.
			return versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf("%s is signed now (%s); rollout %s took it unsigned", v.Tag, v.SignedBy[app.Name], cur.ID)}, nil
		case cur.Tag == v.Tag && cur.Digest == v.Digest:
			return versionpolicy.Decision{Reason: fmt.Sprintf("%s is being rolled out (rollout %s)", v.Tag, cur.ID)}, nil
		case policy.Track == versionpolicy.Newest && builtBefore(v.Created, cur.ImageCreated):
			return versionpolicy.Decision{Reason: fmt.Sprintf("%s was built before %s, which rollout %s is rolling out", v.Tag, cur.Tag, cur.ID)}, nil
		case cur.Tag != v.Tag && policy.NotNewer(cur.Tag, v.Tag):
			return versionpolicy.Decision{Reason: fmt.Sprintf("%s is not newer than %s, which rollout %s is rolling out", v.Tag, cur.Tag, cur.ID)}, nil
		}
	}
	return d, nil
}

// decideCommit decides a git application's verified commit: like GitOps
// agents, flotilla applies what the branch (or tag) says, whatever its
// place in history; only the commit deployed or being rolled out already
// is skipped.
func decideCommit(st rollout.AppState, inFlight []rollout.Rollout, v events.ImageVerified) versionpolicy.Decision {
	if v.Digest == st.DeployedDigest {
		return versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is deployed already", v.Digest, v.Tag)}
	}
	for _, cur := range inFlight {
		if (cur.Phase == rollout.Progressing || cur.Phase == rollout.Queued) && cur.Digest == v.Digest {
			return versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is being rolled out (rollout %s)", v.Digest, v.Tag, cur.ID)}
		}
	}
	return versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf("commit %s of %s", v.Digest, v.Tag)}
}

// inFlight lists the application's rollouts in flight (one read, for both
// the version decision and supersede or queue).
func (f *Function) inFlight(ctx context.Context, app string) ([]rollout.Rollout, error) {
	ros, err := f.repo.ListInFlight(ctx)
	if err != nil {
		return nil, err
	}
	var out []rollout.Rollout
	for _, ro := range ros {
		if ro.Application == app {
			out = append(out, ro)
		}
	}
	return out, nil
}

// quarantine marks a version of an application bad: it never rolls out
// again, and the rollouts in flight carrying it are aborted (rolled back;
// a queued one just ends).
func (f *Function) quarantine(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	q, err := events.Decode[events.QuarantineRequested](e)
	if err != nil {
		return nil, err
	}
	mark := rollout.Quarantine{Tag: q.Tag, Digest: q.Digest, By: q.User, Reason: q.Reason, At: e.Time().UTC()}
	if err := f.repo.UpdateApp(ctx, q.Application, func(st *rollout.AppState) error {
		for _, have := range st.Quarantined {
			if have.Tag == mark.Tag && have.Digest == mark.Digest {
				return nil // a redelivery
			}
		}
		st.Quarantined = append(st.Quarantined, mark)
		return nil
	}); err != nil {
		return nil, err
	}
	ros, err := f.repo.ListInFlight(ctx)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	for _, ro := range ros {
		if ro.Application != q.Application || !mark.Matches(ro.Tag, ro.Digest) {
			continue
		}
		reason := fmt.Sprintf("%s was quarantined by %s: %s", ro.Tag, q.User, q.Reason)
		_, evs, err := f.repo.UpdateEmit(ctx, ro.ID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
			switch r.Phase {
			case rollout.Queued:
				r.Phase, r.Reason = rollout.Superseded, reason
				return nil, nil
			case rollout.Progressing:
				r.Phase, r.Reason = rollout.Failed, reason
				ev, err := derive(e, events.TypeRolloutFailed, *r, reason)
				return []cloudevents.Event{ev}, err
			}
			return nil, nil
		})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// rollBack rolls the whole fleet back from a succeeded rollout to the
// version before it: a rollout of its own ("rollback-" + the id) with the
// clusters as the succeeded one left them, failed from the start, so the
// rollback function reverts every cluster to the image its primary ran
// before, newest wave first, without analysis. It is created Queued and
// then failed with its event in one transaction, so a redelivery after a
// crash in between finishes the job.
func (f *Function) rollBack(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	c, err := events.Decode[events.Control](e)
	if err != nil {
		return nil, err
	}
	done, err := f.repo.Get(ctx, c.RolloutID)
	if errors.Is(err, rollout.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if done.Phase != rollout.Succeeded {
		return nil, nil
	}
	ro := done
	ro.ID, ro.RollbackOf, ro.Phase = "rollback-"+done.ID, done.ID, rollout.Queued
	ro.Wave, ro.Failures, ro.Retries, ro.Waiting, ro.Paused = len(done.Waves)-1, nil, 0, "", ""
	ro.Waves = make([]rollout.Wave, len(done.Waves))
	for i, w := range done.Waves {
		ro.Waves[i] = rollout.Wave{Name: w.Name, Clusters: append([]rollout.Cluster(nil), w.Clusters...)}
	}
	if _, err := f.repo.Create(ctx, ro); err != nil {
		return nil, err
	}
	reason := fmt.Sprintf("rollback of %s (%s) to %s, requested by %s", done.ID, done.Tag, orDash(done.PreviousTag), pausedBy(c))
	_, out, err := f.repo.UpdateEmit(ctx, ro.ID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		if r.Phase != rollout.Queued {
			return nil, nil
		}
		r.Phase, r.Reason = rollout.Failed, reason
		ev, err := derive(e, events.TypeRolloutFailed, *r, reason)
		return []cloudevents.Event{ev}, err
	})
	return out, err
}

func orDash(s string) string {
	if s == "" {
		return "the version before"
	}
	return s
}

// pausedBy says who sent a control, and why.
func pausedBy(c events.Control) string {
	if c.Reason == "" {
		return c.User
	}
	return c.User + ": " + c.Reason
}

// builtBefore reports whether an image built at t is not newer than one
// built at than, both known.
func builtBefore(t, than time.Time) bool {
	return !t.IsZero() && !than.IsZero() && !t.After(than)
}
