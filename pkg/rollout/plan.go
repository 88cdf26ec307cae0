package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// Planning: whether a verified version rolls out (the version decision),
// the waves its rollout runs, what it does about the application's
// rollouts in flight (supersede or queue), its start, a quarantine and a
// rollback of the whole fleet.

// Plan builds rollout id of verified version v of app, given what the
// application runs (st) and its rollouts in flight, or says why v does not
// roll out (skip, never empty then). only, when not nil, limits the
// rollout to those clusters and to the clusters of the rollouts in flight,
// which it takes over (a git push that changed what only they render). An
// unsigned build goes only as far as the waves that take one.
func Plan(cfg *config.Config, app config.Application, st AppState, inFlight []Rollout, v events.ImageVerified, id string, only []string) (ro Rollout, skip string, err error) {
	var d versionpolicy.Decision
	var set SetVersion
	signer := app.Name // whose signature policy verify judged v by
	if TupleSet(app) {
		// A member's image, or the commit of a set's git members: the
		// set's version is a tuple (setversion.go, setmix.go).
		member, ok := SetMemberOf(cfg, app, v.Image)
		switch {
		case ok:
			set, d, err = DecideSetPush(app, member, st, inFlight, v)
			signer = member.Name
		case app.Git() != nil:
			set, d = DecideSetCommit(app, st, inFlight, v)
		default:
			return Rollout{}, fmt.Sprintf("%s is the image of no member of release set %s", v.Image, app.Name), nil
		}
	} else {
		d, err = DecideVersion(app, st, inFlight, v)
	}
	if err != nil {
		return Rollout{}, "", err
	}
	if !d.Accept {
		return Rollout{}, cmp.Or(d.Reason, "the version policy does not take "+v.Tag), nil
	}
	ro = Rollout{ID: id, Application: app.Name, Image: v.Image, Tag: v.Tag, Digest: v.Digest, Phase: Progressing,
		PreviousTag: st.DeployedTag, PreviousDigest: st.DeployedDigest, ImageCreated: v.Created, Source: cmp.Or(v.Source, SourceWebhook),
		PushedBy: v.PushedBy}
	if set != nil {
		ro.Image, ro.Tag, ro.Digest, ro.ImageCreated = app.Name, set.Tag(), set.Digest(), time.Time{}
		ro.Versions, ro.PreviousVersions = set, slices.Clone(st.DeployedVersions)
	}
	if app.Set != nil {
		ro.Members = app.Set.Names()
	}
	ro.Waves = Waves(cfg, app)
	if only != nil {
		ro.Waves, ro.Limited = LimitWaves(cfg, ro.Waves, only, inFlight), true
	}
	if len(ro.Waves) == 0 { // config validation refuses it; a config changed under a running flotilla
		return Rollout{}, "the application targets no cluster of the fleet", nil
	}
	ro.SignedBy = v.SignedBy[signer]
	why, unsigned := v.Unsigned[signer]
	if set != nil {
		// The pushed member's entry, or one taken along from a rollout
		// in flight: each member's verdict is its own.
		why = set.Unsigned()
		unsigned = why != ""
	}
	if unsigned {
		ro.Unsigned = why
		n := slices.IndexFunc(ro.Waves, func(w Wave) bool { return w.SignatureRequired })
		if n == 0 {
			return Rollout{}, fmt.Sprintf("no signature is trusted (%s) and wave %s requires one", why, ro.Waves[0].Name), nil
		}
		if n > 0 {
			ro.Reason = fmt.Sprintf("unsigned: rolls out to the waves before %s, which requires a signature", ro.Waves[n].Name)
			ro.StopsBefore, ro.Waves = ro.Waves[n].Name, ro.Waves[:n]
		}
	}
	return ro, "", nil
}

// Waves are the fleet's waves as app's rollout runs them: only the
// clusters app targets (a wave left with none is skipped), each wave's
// policy scaled to its clusters.
func Waves(cfg *config.Config, app config.Application) []Wave {
	var out []Wave
	for _, w := range cfg.Fleet.Waves {
		wave := Wave{Name: w.Name}
		for _, name := range w.ClusterNames() {
			if c, ok := cfg.Cluster(name); ok && !app.Targets(c) {
				continue
			}
			wave.Clusters = append(wave.Clusters, Cluster{Name: name, Phase: ClusterPending})
		}
		if len(wave.Clusters) == 0 {
			continue
		}
		policy := w.Policy(cfg.Fleet.WavePolicy)
		wave.MaxParallel, wave.MaxFailures = policy.Limits(len(wave.Clusters))
		wave.BakeTime = policy.Bake()
		wave.Approvals = policy.Approvers()
		if a := policy.Approvals; a != nil && wave.Approvals > 0 {
			wave.ApprovalsFrom, wave.SeparationOfDuties = slices.Clone(a.From), a.SeparationOfDuties
		}
		wave.SignatureRequired = verifies(cfg, app) && policy.SignatureRequired()
		out = append(out, wave)
	}
	return out
}

// verifies tells whether app verifies signatures: its own verify, or,
// for a release set, a member's (each image member's pushes are judged by
// its own verify).
func verifies(cfg *config.Config, app config.Application) bool {
	if app.Verify != nil || app.Set == nil {
		return app.Verify != nil
	}
	for _, name := range app.Set.Names() {
		if m, ok := cfg.Application(name); ok && m.Verify != nil {
			return true
		}
	}
	return false
}

// LimitWaves keeps of ws the clusters named by only or by a rollout in
// flight (a newer commit takes their change along), and the waves left
// with clusters; each wave's limits are computed again for its size.
func LimitWaves(cfg *config.Config, ws []Wave, only []string, inFlight []Rollout) []Wave {
	keep := map[string]bool{}
	for _, n := range only {
		keep[n] = true
	}
	for _, cur := range inFlight {
		if cur.Phase == Progressing || cur.Phase == Queued {
			for _, w := range cur.Waves {
				for _, c := range w.Clusters {
					keep[c.Name] = true
				}
			}
		}
	}
	var out []Wave
	for _, w := range ws {
		w.Clusters = slices.DeleteFunc(slices.Clone(w.Clusters), func(c Cluster) bool { return !keep[c.Name] })
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

// DecideVersion says whether v rolls out. The baseline is what the fleet
// last ran successfully (so a hotfix after a rolled back version is
// accepted), and the same tag pushed again with a new digest (a rebuild, a
// mutable tag moved) is a new version; v must also be newer than a
// rollout in flight or waiting, which it would take over. A quarantined
// version never rolls out.
func DecideVersion(app config.Application, st AppState, inFlight []Rollout, v events.ImageVerified) (versionpolicy.Decision, error) {
	if q, ok := st.QuarantineOf(v.Tag, v.Digest); ok {
		return versionpolicy.Decision{Reason: fmt.Sprintf("%s is quarantined (by %s: %s)", v.Tag, q.By, q.Reason)}, nil
	}
	if app.Git() != nil {
		return decideCommit(st, inFlight, v), nil
	}
	if p := app.DeniedBy(v.Tag); p != "" {
		return versionpolicy.Decision{Reason: fmt.Sprintf("%s matches the application's denyTags pattern %q", v.Tag, p)}, nil
	}
	policy, err := policyOf(app)
	if err != nil {
		return versionpolicy.Decision{}, err
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
		if cur.Phase != Progressing && cur.Phase != Queued {
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

// policyOf is app's version policy: its track, semver constraint,
// pre-releases and tag filter.
func policyOf(app config.Application) (versionpolicy.Policy, error) {
	policy := versionpolicy.Policy{Track: versionpolicy.Track(app.Track), Constraint: app.Semver, PreReleases: app.PreReleases}
	if f := app.TagFilter; f != nil {
		re, err := f.Regexp()
		if err != nil {
			return policy, fault.Permanent(fmt.Errorf("application %s: tag filter: %w", app.Name, err))
		}
		policy.Filter, policy.Extract = re, f.Extract
	}
	return policy, nil
}

// Polled picks, of the tags a poll listed in app's repository, the newest
// that would roll out now and that no rollout was started for yet: the
// version decision accepts it (DecideVersion, against what the fleet runs
// and the rollouts in flight) and it is newer than the newest tag a
// rollout was started for (st.LatestTag: what a webhook, or an earlier
// poll, brought; a version that failed is not brought back). It returns
// "" and why when there is none. A poll cannot order track Newest's tags
// (that needs every image's build time), nor see a tag moved to a new
// digest: neither is polled.
func Polled(app config.Application, st AppState, inFlight []Rollout, tags []string) (tag, reason string, err error) {
	switch {
	case app.Git() != nil:
		return "", "a git application: its branch is polled, not tags (PolledCommit)", nil
	case app.Track == config.TrackNewest:
		return "", "track Newest: tags are ordered by build time (PolledNewest)", nil
	}
	policy, err := policyOf(app)
	if err != nil {
		return "", "", err
	}
	for _, t := range slices.Sorted(slices.Values(tags)) {
		if tag != "" && policy.NotNewer(tag, t) {
			continue
		}
		if st.LatestTag != "" && policy.NotNewer(st.LatestTag, t) {
			continue
		}
		if slices.ContainsFunc(inFlight, func(r Rollout) bool { return (r.Phase == Progressing || r.Phase == Queued) && r.Tag == t }) {
			continue
		}
		d, err := DecideVersion(app, st, inFlight, events.ImageVerified{Tag: t})
		if err != nil {
			return "", "", err
		}
		if d.Accept {
			tag = t
		}
	}
	if tag != "" {
		return tag, "", nil
	}
	base := cmp.Or(st.LatestTag, st.DeployedTag)
	if base == "" {
		return "", fmt.Sprintf("none of the %d tags is a version the application takes", len(tags)), nil
	}
	return "", fmt.Sprintf("none of the %d tags is newer than %s that the application takes", len(tags), base), nil
}

// PolledCommit says whether the head commit a poll read from a git
// application's branch rolls out: not when it is deployed, being rolled
// out, or was rolled out before (st.LatestTag names it: a webhook, or an
// earlier poll, brought it; a commit that failed is not brought back).
func PolledCommit(st AppState, inFlight []Rollout, branch, head string) (bool, string) {
	abbrev := head[:min(12, len(head))]
	if st.LatestTag == branch+"@"+abbrev {
		return false, fmt.Sprintf("commit %s is the newest a rollout was started for", abbrev)
	}
	if d := decideCommit(st, inFlight, events.ImageVerified{Tag: branch + "@" + abbrev, Digest: head}); !d.Accept {
		return false, d.Reason
	}
	return true, ""
}

// decideCommit decides a git application's verified commit: like GitOps
// agents, flotilla applies what the branch (or tag) says, whatever its
// place in history; only the commit deployed or being rolled out already
// is skipped.
func decideCommit(st AppState, inFlight []Rollout, v events.ImageVerified) versionpolicy.Decision {
	if v.Digest == st.DeployedDigest {
		return versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is deployed already", v.Digest, v.Tag)}
	}
	for _, cur := range inFlight {
		if (cur.Phase == Progressing || cur.Phase == Queued) && cur.Digest == v.Digest {
			return versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is being rolled out (rollout %s)", v.Digest, v.Tag, cur.ID)}
		}
	}
	return versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf("commit %s of %s", v.Digest, v.Tag)}
}

// builtBefore reports whether an image built at t is not newer than one
// built at than, both known.
func builtBefore(t, than time.Time) bool {
	return !t.IsZero() && !than.IsZero() && !t.After(than)
}

// MakeWay decides what the new rollout ro does about its application's
// rollouts in flight: a queued one is superseded by it (only the newest
// waits); the one running is superseded by it (onNewVersion: supersede),
// or it queues behind it (queue, or a rollback under way, which is never
// cut short). It returns whether ro queues, and the rollouts it
// supersedes (Supersede).
func MakeWay(app config.Application, inFlight []Rollout, ro Rollout) (queue bool, supersede []string) {
	for _, cur := range inFlight {
		if cur.ID == ro.ID {
			continue
		}
		switch {
		case cur.Phase == Queued:
			supersede, queue = append(supersede, cur.ID), true
		case cur.Phase == Failed:
			queue = true
		case cur.Phase == Progressing && app.OnNewVersion == config.OnNewVersionQueue:
			queue = true
		case cur.Phase == Progressing || cur.Phase == RollbackFailed:
			supersede = append(supersede, cur.ID)
		}
	}
	return queue, supersede
}

// Supersede ends r, running or queued, as Superseded by rollout by, caused
// by cause, and closes its open pull requests; a rollout that ended or
// failed (its rollback under way) stays as it is.
func (r *Rollout) Supersede(cause cloudevents.Event, by Rollout) ([]cloudevents.Event, error) {
	if r.Phase.Done() || r.Phase == Failed {
		return nil, nil
	}
	r.Phase = Superseded
	r.Reason = fmt.Sprintf("superseded by %s (%s)", by.Tag, by.ID)
	ev, err := r.Event(cause, events.TypeRolloutSuperseded, r.Reason)
	if err != nil {
		return nil, err
	}
	closes, err := r.ClosePullRequests(cause, r.Reason, cause.Time().UTC())
	return append([]cloudevents.Event{ev}, closes...), err
}

// Event is a rollout event of r (rollout.failed, .queued, .superseded)
// giving reason, caused by cause.
func (r *Rollout) Event(cause cloudevents.Event, typ, reason string) (cloudevents.Event, error) {
	cause = cause.Clone()
	cause.SetExtension(events.ExtRolloutID, r.ID)
	return events.Derive(cause, typ, r.ID, events.RolloutResult{RolloutID: r.ID, Reason: reason})
}

// Started are the events that start r, caused by cause: rollout.started,
// wave.started, and, as far as g lets them (Start), the runs of the first
// wave's clusters, in the same change (wave.started announces the wave to
// followers). With no application in g (no longer configured) nothing
// starts. A rollout queued, or past its first wave, only announces.
func (r *Rollout) Started(cause cloudevents.Event, g Gates) ([]cloudevents.Event, error) {
	var waves [][]string
	for _, w := range r.Waves {
		var names []string
		for _, c := range w.Clusters {
			names = append(names, c.Name)
		}
		waves = append(waves, names)
	}
	cause = cause.Clone()
	cause.SetExtension(events.ExtRolloutID, r.ID)
	s, err := events.Derive(cause, events.TypeRolloutStarted, r.Application, events.RolloutStarted{
		RolloutID: r.ID, Application: r.Application, Image: r.Image, Tag: r.Tag, Digest: r.Digest, Waves: waves, Kind: r.Kind,
	})
	if err != nil {
		return nil, err
	}
	w, err := events.Derive(cause, events.TypeWaveStarted, r.Application, events.WaveStarted{RolloutID: r.ID, Wave: 0, Clusters: waves[0]})
	if err != nil {
		return nil, err
	}
	out := []cloudevents.Event{s, w}
	if r.Phase != Progressing || r.Wave != 0 || g.App.Name == "" {
		return out, nil
	}
	runs, err := r.Start(w, g)
	return append(out, runs...), err
}

// Quarantined ends r because its version was quarantined (reason): a
// queued rollout just ends, one in progress fails and is rolled back.
func (r *Rollout) Quarantined(cause cloudevents.Event, reason string) ([]cloudevents.Event, error) {
	switch r.Phase {
	case Queued:
		r.Phase, r.Reason = Superseded, reason
	case Progressing:
		r.Phase, r.Reason = Failed, reason
		ev, err := r.Event(cause, events.TypeRolloutFailed, reason)
		return []cloudevents.Event{ev}, err
	}
	return nil, nil
}

// Quarantine records mark among the application's quarantined versions,
// once.
func (s *AppState) Quarantine(mark Quarantine) {
	for _, have := range s.Quarantined {
		if have.Tag == mark.Tag && have.Digest == mark.Digest {
			return
		}
	}
	s.Quarantined = append(s.Quarantined, mark)
}

// RollbackOf is the rollout that rolls the whole fleet back from the
// succeeded rollout done to the version before it ("rollback-" + its id):
// the clusters as done left them, created Queued, then failed from the
// start (FailRollback) so the rollback reverts every cluster to the image
// its primary ran before, newest wave first, without analysis.
func RollbackOf(done Rollout) Rollout {
	ro := done
	ro.ID, ro.RollbackOf, ro.Phase = "rollback-"+done.ID, done.ID, Queued
	ro.Wave, ro.Failures, ro.Retries, ro.Waiting, ro.Paused = len(done.Waves)-1, nil, 0, "", ""
	ro.Waves = make([]Wave, len(done.Waves))
	for i, w := range done.Waves {
		ro.Waves[i] = Wave{Name: w.Name, Clusters: append([]Cluster(nil), w.Clusters...)}
	}
	return ro
}

// FailRollback starts a rollback of the whole fleet (RollbackOf) requested
// by by: it fails, so the rollback function reverts it; once only.
func (r *Rollout) FailRollback(cause cloudevents.Event, by string) ([]cloudevents.Event, error) {
	if r.Phase != Queued || r.RollbackOf == "" {
		return nil, nil
	}
	to := r.PreviousTag
	if to == "" {
		to = "the version before"
	}
	r.Phase, r.Reason = Failed, fmt.Sprintf("rollback of %s (%s) to %s, requested by %s", r.RollbackOf, r.Tag, to, by)
	ev, err := r.Event(cause, events.TypeRolloutFailed, r.Reason)
	return []cloudevents.Event{ev}, err
}
