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
	"github.com/flotilla-cd/flotilla/pkg/rollout"
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
	cfg  config.Provider
	repo Rollouts
	now  func() time.Time
}

// New returns plan over the applications and waves of cfg; now defaults
// to time.Now.
func New(cfg config.Provider, repo Rollouts, now func() time.Time) *Function {
	if now == nil {
		now = time.Now
	}
	return &Function{cfg: cfg, repo: repo, now: now}
}

func (*Function) Name() string { return "plan" }
func (*Function) Consumes() []string {
	return []string{events.TypeImageVerified, events.TypeGitVerified, events.TypeRolloutSucceeded, events.TypeRolloutRolledBack, events.TypeRolloutSuperseded,
		events.TypeVersionQuarantineRequested, events.TypeRolloutRollbackRequested, events.TypeReconcileRequested}
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
	case events.TypeReconcileRequested:
		return f.reconcile(ctx, e)
	case events.TypeImageVerified:
	default:
		return f.dequeue(ctx, e)
	}
	v, err := events.Decode[events.ImageVerified](e)
	if err != nil {
		return nil, err
	}
	var out []cloudevents.Event
	cfg := f.cfg.Current() // one config for the whole event
	planned := map[string]bool{}
	for _, app := range cfg.Applications {
		if app.Git() != nil || !config.SameImage(app.Image, v.Image) {
			continue
		}
		if app.MemberOf != "" {
			// A member's image moves its release set (rollout.DecideSetPush).
			set, ok := cfg.Application(app.MemberOf)
			if !ok || !rollout.TupleSet(set) {
				continue
			}
			app = set
		}
		if planned[app.Name] {
			continue
		}
		planned[app.Name] = true
		evs, err := f.planApp(ctx, cfg, e, v, app, nil)
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
	cfg := f.cfg.Current() // one config for the whole event
	for _, name := range v.Applications {
		app, ok := cfg.Application(name)
		if !ok || app.Git() == nil {
			continue // the configuration changed since verify
		}
		iv := events.ImageVerified{Image: config.DisplayURL(app.Git().URL), Tag: v.Version(), Digest: v.Commit, Source: v.Source, PushedBy: v.Pusher}
		var only []string
		if cs, ok := v.Clusters[name]; ok {
			only = cs
		}
		evs, err := f.planApp(ctx, cfg, e, iv, app, only)
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
func (f *Function) planApp(ctx context.Context, cfg *config.Config, e cloudevents.Event, v events.ImageVerified, app config.Application, only []string) ([]cloudevents.Event, error) {
	id := ID(e.ID(), app.Name)
	ro, err := f.repo.Get(ctx, id)
	if err == nil && ro.Phase == rollout.Queued {
		return f.saw(ctx, e, v, app.Name, nil) // a redelivery: it waits already
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
		// A redelivery: the same events again (the journal drops them).
		missed, err := f.saw(ctx, e, v, app.Name, nil)
		if err != nil {
			return nil, err
		}
		evs, err := f.start(ctx, e, ro.ID)
		return append(missed, evs...), err
	}
	if !errors.Is(err, rollout.ErrNotFound) {
		return nil, err
	}
	st, inFlight, err := f.appState(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	ro, skip, err := rollout.Plan(cfg, app, st, inFlight, v, id, only)
	if err != nil {
		return nil, err
	}
	if skip != "" {
		// What the API and `flotilla get applications` answer to "I pushed
		// and nothing happened"; kept again on a redelivery, the same.
		seen := seenOf(e, v)
		missed, err := f.saw(ctx, e, v, app.Name, func(st *rollout.AppState) {
			st.Skip(rollout.Skipped{Tag: v.Tag, Digest: v.Digest, Source: seen.Source, Outcome: rollout.OutcomeSkipped,
				Reason: skip, At: seen.At, EventID: seen.EventID})
		})
		if err != nil {
			return nil, err
		}
		ev, err := events.Derive(e, events.TypeRolloutSkipped, app.Name,
			events.RolloutSkipped{Application: app.Name, Image: v.Image, Tag: v.Tag, Reason: skip})
		return append(missed, ev), err
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
	missed, err := f.saw(ctx, e, v, app.Name, func(st *rollout.AppState) {
		st.LatestTag, st.LatestRollout = ro.Tag, id
		st.RecordLatest(ro, v)
		if queue {
			st.Queued = id
		}
	})
	if err != nil {
		return nil, err
	}
	out = append(out, missed...)
	if queue {
		q, err := ro.Event(e, events.TypeRolloutQueued, "waiting for the application's rollout in flight to end")
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
		return r.Started(e, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
	})
	return out, err
}

// makeWay supersedes what the new rollout ro supersedes of the
// application's rollouts in flight (rollout.MakeWay), each in its own
// change with its events, and reports whether ro queues.
func (f *Function) makeWay(ctx context.Context, e cloudevents.Event, app config.Application, inFlight []rollout.Rollout, ro rollout.Rollout) (bool, []cloudevents.Event, error) {
	queue, supersede := rollout.MakeWay(app, inFlight, ro)
	var out []cloudevents.Event
	for _, id := range supersede {
		_, evs, err := f.repo.UpdateEmit(ctx, id, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
			return r.Supersede(e, ro)
		})
		if err != nil && !errors.Is(err, rollout.ErrNotFound) {
			return false, nil, err
		}
		out = append(out, evs...)
	}
	return queue, out, nil
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
				a.DeployedVersions = slices.Clone(ended.PreviousVersions)
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
		return r.Started(e, rollout.GatesOf(f.cfg.Current(), r.Application, fleet, f.now()))
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

// appState reads the application's state and its rollouts in flight, the
// baseline a push is decided against. Its latest rollout, ended since
// and not yet recorded as deployed (AppState.Undeployed: advance archives
// a rollout, then records it), counts as deployed when it succeeded: a
// push planned in that moment saw neither the rollout in flight nor its
// version deployed, and took the version before as the baseline (a
// downgrade rolled out so on the scale-out fleet, its replicas planning
// while another recorded the rollout's end).
func (f *Function) appState(ctx context.Context, app string) (rollout.AppState, []rollout.Rollout, error) {
	st, err := f.repo.App(ctx, app)
	if err != nil {
		return st, nil, err
	}
	inFlight, err := f.inFlight(ctx, app)
	if err != nil {
		return st, nil, err
	}
	if id := st.Undeployed(inFlight); id != "" {
		ro, err := f.repo.Get(ctx, id)
		switch {
		case errors.Is(err, rollout.ErrNotFound):
		case err != nil:
			return st, nil, err
		case rollout.Deploys(ro):
			st.Deploy(ro)
		}
	}
	return st, inFlight, nil
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
		st.Quarantine(mark)
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
			return r.Quarantined(e, reason)
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
	ro := rollout.RollbackOf(done)
	if _, err := f.repo.Create(ctx, ro); err != nil {
		return nil, err
	}
	_, out, err := f.repo.UpdateEmit(ctx, ro.ID, func(r *rollout.Rollout) ([]cloudevents.Event, error) {
		return r.FailRollback(e, pausedBy(c))
	})
	return out, err
}

// pausedBy says who sent a control, and why.
func pausedBy(c events.Control) string {
	if c.Reason == "" {
		return c.User
	}
	return c.User + ": " + c.Reason
}

// reconcile starts a rollout of the application's validated digest to
// the clusters a check found behind (a catch-up) or drifted (a revert):
// limited to them, with the waves' pipeline and analysis, unless the
// digest is no longer the validated one or a rollout of the application
// is in flight (rollout.PlanReconcile). Its id derives from the request's,
// which derives from the clusters, digest and kind: one such rollout,
// however often it is asked for.
func (f *Function) reconcile(ctx context.Context, e cloudevents.Event) ([]cloudevents.Event, error) {
	r, err := events.Decode[events.ReconcileRequested](e)
	if err != nil {
		return nil, err
	}
	cfg := f.cfg.Current() // one config for the whole event
	app, ok := cfg.Application(r.Application)
	if !ok {
		return nil, nil // the configuration changed since
	}
	id := ID(e.ID(), app.Name)
	switch ro, err := f.repo.Get(ctx, id); {
	case err == nil && ro.Phase.Done():
		return nil, nil // a redelivery: it ran
	case err == nil:
		return f.start(ctx, e, ro.ID)
	case !errors.Is(err, rollout.ErrNotFound):
		return nil, err
	}
	st, inFlight, err := f.appState(ctx, app.Name)
	if err != nil {
		return nil, err
	}
	ro, skip := rollout.PlanReconcile(cfg, app, st, inFlight, r, id)
	if skip != "" {
		// Not a push skipped: the next check finds what is left to do.
		return nil, nil
	}
	if _, err := f.repo.Create(ctx, ro); err != nil {
		return nil, err
	}
	return f.start(ctx, e, ro.ID)
}
