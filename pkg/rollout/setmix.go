package rollout

import (
	"fmt"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// A release set of git and image members (docs/design/release-sets.md,
// "Git and image members") has a tuple as its version, as a set of image
// members: each git member's entry holds the git part's version (the
// repository, branch@abbrev or the git tag, the commit), the same commit
// for every git member, so its Ref is the revision the set's run writes on
// the member's pod template (repository@commit).

// TupleSet tells whether app is a release set whose version is a tuple
// (SetVersion): a set of image members, or one of git and image members.
func TupleSet(app config.Application) bool {
	return ImageSet(app) || app.Set != nil && app.Set.Mixed()
}

// gitMembers are the git members of set app, in order.
func gitMembers(app config.Application) []string {
	var out []string
	if app.Set == nil {
		return nil
	}
	for _, m := range app.Set.Members {
		if m.Image == "" {
			out = append(out, m.Name)
		}
	}
	return out
}

// Commit is the git part's entry of v, a version of set app of git and
// image members (its first git member's); false when v has none.
func (v SetVersion) Commit(app config.Application) (MemberVersion, bool) {
	for _, name := range gitMembers(app) {
		if m, ok := v.Of(name); ok {
			return m, true
		}
	}
	return MemberVersion{}, false
}

// WithCommit is v with every git member of set app at commit c (its image,
// tag and digest), the members in the set's order; v is not changed.
func (v SetVersion) WithCommit(app config.Application, c MemberVersion) SetVersion {
	out := v
	for _, name := range gitMembers(app) {
		e := c
		e.Application = name
		out = out.With(app.Set.Names(), e)
	}
	return out
}

// DecideSetCommit decides verified commit v (a git push: Image the
// repository, Tag branch@abbrev or the git tag, Digest the commit) of set
// app of git and image members, as a git application's commit against the
// git part's entries: the commit the deployed version holds, or one a
// rollout of the set in flight or queued carries, is skipped; else the
// set's version is the baseline (SetBaseline) with every git member at
// the commit. A quarantined commit or set version never rolls out.
func DecideSetCommit(app config.Application, st AppState, inFlight []Rollout, v events.ImageVerified) (SetVersion, versionpolicy.Decision) {
	if q, ok := st.QuarantineOf(v.Tag, v.Digest); ok {
		return nil, versionpolicy.Decision{Reason: fmt.Sprintf("%s is quarantined (by %s: %s)", v.Tag, q.By, q.Reason)}
	}
	if c, ok := st.DeployedVersions.Commit(app); ok && c.Digest == v.Digest {
		return nil, versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is deployed already", v.Digest, v.Tag)}
	}
	for _, cur := range inFlight {
		if cur.Phase != Progressing && cur.Phase != Queued || cur.Kind != "" {
			continue
		}
		if c, ok := cur.Versions.Commit(app); ok && c.Digest == v.Digest {
			return nil, versionpolicy.Decision{Reason: fmt.Sprintf("commit %s (%s) is being rolled out (rollout %s)", v.Digest, v.Tag, cur.ID)}
		}
	}
	next := SetBaseline(st, inFlight).WithCommit(app, MemberVersion{Image: v.Image, Tag: v.Tag, Digest: v.Digest})
	if q, ok := st.QuarantineOf(next.Tag(), next.Digest()); ok {
		return nil, versionpolicy.Decision{Reason: fmt.Sprintf("%s is quarantined (by %s: %s)", next.Tag(), q.By, q.Reason)}
	}
	return next, versionpolicy.Decision{Accept: true, Reason: fmt.Sprintf("commit %s of %s", v.Digest, v.Tag)}
}

// noCommitYet says why an image push of set app of git and image members
// does not roll out when next, its version, has no commit yet ("" when it
// has one, or app is no such set): its git members could not be applied.
func noCommitYet(app config.Application, next SetVersion) string {
	if app.Set == nil || !app.Set.Mixed() {
		return ""
	}
	if _, ok := next.Commit(app); ok {
		return ""
	}
	return fmt.Sprintf("release set %s has no commit of its git members yet: push to its branch first", app.Name)
}
