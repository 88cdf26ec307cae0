package rollout

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

// MemberVersion is one image member's version in a release set's version
// (docs/design/release-sets.md, "Image members").
type MemberVersion struct {
	Application string `json:"application"`
	Image       string `json:"image"` // registry/repository
	Tag         string `json:"tag"`
	Digest      string `json:"digest"`
	// Created is when the image was built (the member's track Newest).
	Created time.Time `json:"created,omitzero"`
	// SignedBy is who signed the digest, as the member's own verify found
	// it (Rollout.SignedBy for an application); Unsigned says why no
	// signature of it is trusted (both "" when the member verifies none):
	// a rollout carrying an unsigned entry, pushed or taken along, stops
	// before the first wave that requires a signature. Neither is part of
	// the version (Manifest).
	SignedBy string `json:"signedBy,omitempty"`
	Unsigned string `json:"unsigned,omitempty"`
}

// Signature says what the member's verify found of m's digest, as
// `flotilla describe rollout` and the web UI show it: "signed by <who>",
// "unsigned: <why>", or "no signer recorded" (the member verifies none,
// or m ran in every wave unsigned: SetBaseline).
func (m MemberVersion) Signature() string {
	switch {
	case m.Unsigned != "":
		return "unsigned: " + m.Unsigned
	case m.SignedBy != "":
		return "signed by " + m.SignedBy
	}
	return "no signer recorded"
}

// SetVersion is a release set of image members' version: one version per
// member, in the set's order; a member no rollout of the set carried yet
// has none (the set leaves it as its clusters run it).
type SetVersion []MemberVersion

// Manifest is the tuple's canonical record: its JSON, members in order,
// without build times (a version is what runs, not when it was built).
func (v SetVersion) Manifest() []byte {
	type entry struct {
		Application string `json:"application"`
		Image       string `json:"image"`
		Tag         string `json:"tag"`
		Digest      string `json:"digest"`
	}
	out := make([]entry, len(v))
	for i, m := range v {
		out[i] = entry{m.Application, m.Image, m.Tag, m.Digest}
	}
	b, _ := json.Marshal(out) // strings only: cannot fail
	return b
}

// Digest is the set's version as a rollout's digest: the hash of its
// manifest ("" for no version).
func (v SetVersion) Digest() string {
	if len(v) == 0 {
		return ""
	}
	h := sha256.Sum256(v.Manifest())
	return "sha256:" + hex.EncodeToString(h[:])
}

// Tag is the set's version as a rollout's tag: each member's
// ("shop-api:1.1.0,shop-frontend:1.0.0").
func (v SetVersion) Tag() string {
	parts := make([]string, len(v))
	for i, m := range v {
		parts[i] = m.Application + ":" + m.Tag
	}
	return strings.Join(parts, ",")
}

// Unsigned says why v's unsigned entries are not trusted, each prefixed
// with its member ("shop-api: ..."; "" when none is).
func (v SetVersion) Unsigned() string {
	var out []string
	for _, m := range v {
		if m.Unsigned != "" {
			out = append(out, m.Application+": "+m.Unsigned)
		}
	}
	return strings.Join(out, "; ")
}

// Describe names v as people read it (`flotilla describe rollout`,
// `flotilla simulate`'s report): each member's tag and short digest, in
// the set's order ("shop-api 1.1.0 (sha256:0123456789ab), shop-frontend
// 1.0.0 (sha256:...)"); "" for no version.
func (v SetVersion) Describe() string {
	parts := make([]string, len(v))
	for i, m := range v {
		parts[i] = fmt.Sprintf("%s %s (%s)", m.Application, m.Tag, shortDigest(m.Digest))
	}
	return strings.Join(parts, ", ")
}

// shortDigest is d with its hex cut to 12 digits.
func shortDigest(d string) string {
	if _, x, ok := strings.Cut(d, ":"); ok && len(x) > 12 {
		return d[:len(d)-len(x)] + x[:12]
	}
	return d
}

// Of is member's version in v.
func (v SetVersion) Of(member string) (MemberVersion, bool) {
	i := slices.IndexFunc(v, func(m MemberVersion) bool { return m.Application == member })
	if i < 0 {
		return MemberVersion{}, false
	}
	return v[i], true
}

// With is v with m as its member's version, the members in order (the
// set's); v is not changed.
func (v SetVersion) With(order []string, m MemberVersion) SetVersion {
	out := slices.DeleteFunc(slices.Clone(v), func(x MemberVersion) bool { return x.Application == m.Application })
	out = append(out, m)
	slices.SortStableFunc(out, func(a, b MemberVersion) int {
		return cmp.Compare(indexOr(order, a.Application), indexOr(order, b.Application))
	})
	return out
}

// indexOr is s's index in order, len(order) when absent (last).
func indexOr(order []string, s string) int {
	if i := slices.Index(order, s); i >= 0 {
		return i
	}
	return len(order)
}

// ImageSet tells whether app is a release set of image members: its
// version is a SetVersion.
func ImageSet(app config.Application) bool { return app.Set != nil && app.Git() == nil }

// SetMemberOf is the member of image set set whose image v is.
func SetMemberOf(cfg *config.Config, set config.Application, image string) (config.Application, bool) {
	for _, name := range set.Set.Names() {
		if m, ok := cfg.Application(name); ok && m.Git() == nil && config.SameImage(m.Image, image) {
			return m, true
		}
	}
	return config.Application{}, false
}

// SetBaseline is what a push of one member moves from: the newest rollout
// of the set in flight or queued (the new one takes its versions along:
// a supersede never drops a pushed version, nor an entry's SignedBy or
// Unsigned), else the deployed version (which ran in every wave: no entry
// of it is held back again, as an application's deployed version is
// not; each keeps its signer).
func SetBaseline(st AppState, inFlight []Rollout) SetVersion {
	var newest *Rollout
	for i, r := range inFlight {
		if (r.Phase == Progressing || r.Phase == Queued) && r.Kind == "" && (newest == nil || r.Created.After(newest.Created)) {
			newest = &inFlight[i]
		}
	}
	if newest != nil {
		return newest.Versions
	}
	out := slices.Clone(st.DeployedVersions)
	for i := range out {
		out[i].Unsigned = ""
	}
	return out
}

// DecideSetPush decides verified version v of member, an image member of
// release set set: the member's own version policy judges v against its
// version in the set's deployed version and in the set's rollouts in
// flight (DecideVersion, as for an application), then the set's version
// is the baseline (SetBaseline) with member at v; a quarantined set
// version never rolls out.
func DecideSetPush(set, member config.Application, st AppState, inFlight []Rollout, v events.ImageVerified) (SetVersion, versionpolicy.Decision, error) {
	mst, mine := MemberState(member.Name, st, inFlight)
	d, err := DecideVersion(member, mst, mine, v)
	if err != nil || !d.Accept {
		if d.Reason != "" {
			d.Reason = member.Name + ": " + d.Reason
		}
		return nil, d, err
	}
	next := SetBaseline(st, inFlight).With(set.Set.Names(), MemberVersion{Application: member.Name, Image: v.Image, Tag: v.Tag, Digest: v.Digest, Created: v.Created,
		SignedBy: v.SignedBy[member.Name], Unsigned: v.Unsigned[member.Name]})
	if why := noCommitYet(set, next); why != "" {
		return nil, versionpolicy.Decision{Reason: why}, nil
	}
	if q, ok := st.QuarantineOf(next.Tag(), next.Digest()); ok {
		return nil, versionpolicy.Decision{Reason: fmt.Sprintf("%s is quarantined (by %s: %s)", next.Tag(), q.By, q.Reason)}, nil
	}
	return next, d, nil
}

// MemberState is member's view of its image set's state st and rollouts
// in flight, so that what judges an application's tags (DecideVersion,
// the poll's Polled, PolledNewest, PolledMoved) judges the member's: its
// entry in the set's deployed version as the deployed version, its entry
// in LatestVersions as the newest tag a rollout was started for, and the
// set's rollouts of a version carrying it (MemberRollout).
func MemberState(member string, st AppState, inFlight []Rollout) (AppState, []Rollout) {
	dep, _ := st.DeployedVersions.Of(member)
	latest, _ := st.LatestVersions.Of(member)
	mst := AppState{Name: member, DeployedTag: dep.Tag, DeployedDigest: dep.Digest, DeployedCreated: dep.Created, LatestTag: latest.Tag}
	var mine []Rollout
	for _, r := range inFlight {
		if mr, ok := MemberRollout(member, r); ok {
			mine = append(mine, mr)
		}
	}
	return mst, mine
}

// MemberRollout is r, a rollout of an image set's version, as a rollout
// of member's entry in it (its tag, digest and build time); false when r
// carries no entry of member or is a catch-up or a drift's revert.
func MemberRollout(member string, r Rollout) (Rollout, bool) {
	mv, ok := r.Versions.Of(member)
	if !ok || r.Kind != "" {
		return Rollout{}, false
	}
	mr := Rollout{ID: r.ID, Application: member, Phase: r.Phase, Tag: mv.Tag, Digest: mv.Digest, ImageCreated: mv.Created}
	if mv.Unsigned != "" { // r stops because of this entry (not another member's)
		mr.StopsBefore, mr.Unsigned = r.StopsBefore, mv.Unsigned
	}
	return mr, true
}

// RecordLatest records in the set's state that rollout ro was started for
// push v of one of its image members: that member's entry of ro becomes
// its newest version a rollout was started for (LatestVersions). For an
// application, or a rollout that carries no entry of v's image, nothing.
func (st *AppState) RecordLatest(ro Rollout, v events.ImageVerified) {
	i := slices.IndexFunc(ro.Versions, func(m MemberVersion) bool { return config.SameImage(m.Image, v.Image) && m.Digest == v.Digest })
	if i < 0 {
		return
	}
	st.LatestVersions = st.LatestVersions.With(ro.Members, ro.Versions[i])
}
