package versionpolicy

import (
	"fmt"
	"regexp"

	"github.com/Masterminds/semver/v3"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Decision is the outcome of Decide. Reason is always set and reads as a
// sentence fragment for logs and events, e.g.
// "1.3.0 is a minor upgrade of 1.2.4; track PatchLevel allows patch upgrades only".
type Decision struct {
	Accept bool
	Reason string
}

// Decide says whether the candidate tag should replace the current tag under
// track. current may be "" when nothing is deployed yet: then any tag the
// track recognises is accepted.
//
// A candidate the track does not recognise, an older or equal version, or an
// upgrade larger than the track allows is rejected with a reason, not an
// error; so is any candidate when current is not a version the (semantic)
// track can compare against. The only error is an unknown track, which is
// permanent (fault.IsPermanent) and wraps ErrUnknownTrack.
func Decide(track Track, current, candidate string) (Decision, error) {
	return Policy{Track: track}.Decide(current, candidate)
}

// Policy is a track and, for the semantic tracks, an optional semver
// constraint (Masterminds/semver syntax: ">=1.2, <2", "~1.4", "^2") the
// candidate must satisfy, and whether pre-releases may roll out.
type Policy struct {
	Track       Track
	Constraint  string
	PreReleases bool
	// Filter, when set, admits only the tags it matches (Flux's
	// filterTags.pattern); Extract (a template of its groups, "$ts" or
	// "${version}") is then the version compared, of both tags.
	Filter  *regexp.Regexp
	Extract string
}

// version returns what p compares of tag, and whether tag passes p's
// filter.
func (p Policy) version(tag string) (string, bool) {
	if p.Filter == nil {
		return tag, true
	}
	m := p.Filter.FindStringSubmatchIndex(tag)
	if m == nil {
		return "", false
	}
	if p.Extract == "" {
		return tag, true
	}
	return string(p.Filter.ExpandString(nil, p.Extract, tag, m)), true
}

// Check reports an unknown track or a constraint that does not parse
// (both permanent).
func (p Policy) Check() error {
	if err := p.Track.check(); err != nil {
		return err
	}
	if p.Constraint != "" {
		if _, err := semver.NewConstraint(p.Constraint); err != nil {
			return fault.Permanent(fmt.Errorf("semver constraint %q: %w", p.Constraint, err))
		}
	}
	return nil
}

// Decide is the package's Decide under the whole policy.
func (p Policy) Decide(current, candidate string) (Decision, error) {
	if err := p.Check(); err != nil {
		return Decision{}, err
	}
	tag := candidate
	candidate, ok := p.version(tag)
	if !ok {
		return reject("%s does not match the tag filter %q", tag, p.Filter.String()), nil
	}
	if c, ok := p.version(current); ok {
		current = c
	}
	if p.Track == Newest {
		return decideNewest(current, candidate), nil
	}
	cand, ok := parseVersion(candidate)
	if ok && cand.preRelease() && !p.PreReleases {
		return reject("%s is a pre-release; pre-releases roll out only with preReleases: true", candidate), nil
	}
	if ok && p.Constraint != "" {
		c, _ := semver.NewConstraint(p.Constraint)
		c.IncludePrerelease = p.PreReleases
		if !c.Check(cand.Version) {
			return reject("%s does not satisfy the constraint %q", candidate, p.Constraint), nil
		}
	}
	return decideSemantic(p.Track, current, candidate), nil
}

// decideNewest accepts any valid tag other than the current one: the pushed
// tag is, by construction, the most recently created.
func decideNewest(current, candidate string) Decision {
	switch {
	case !tagRe.MatchString(candidate):
		return reject("%q is not a valid image tag", candidate)
	case candidate == current:
		return reject("%s is the current tag", candidate)
	case current == "":
		return accept("%s is the newest tag and nothing is deployed yet; track %s follows the most recently pushed tag", candidate, Newest)
	}
	return accept("%s is newer than the current %s; track %s follows the most recently pushed tag", candidate, current, Newest)
}

// decideSemantic applies PatchLevel, MinorVersion or MajorVersion.
func decideSemantic(track Track, current, candidate string) Decision {
	cand, ok := parseVersion(candidate)
	if !ok {
		return reject("%q is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)", candidate)
	}
	if current == "" {
		return accept("%s is a version and nothing is deployed yet", candidate)
	}
	cur, ok := parseVersion(current)
	if !ok {
		return reject("the current tag %q is not a semantic version; track %s cannot compare %s with it", current, track, candidate)
	}

	switch c := cand.compare(cur); {
	case c < 0:
		return reject("%s is older than the current %s", candidate, current)
	case c == 0 && candidate == current:
		return reject("%s is the current version", candidate)
	case c == 0:
		return reject("%s is the same version as the current %s", candidate, current)
	}

	kind := cand.upgradeKind(cur)
	allowed := track == MajorVersion ||
		track == MinorVersion && kind != "major" ||
		track == PatchLevel && kind == "patch"
	if !allowed {
		return reject("%s is a %s upgrade of %s; track %s allows %s", candidate, kind, current, track, track.allows())
	}
	return accept("%s is a %s upgrade of %s; track %s allows it", candidate, kind, current, track)
}

func accept(format string, args ...any) Decision {
	return Decision{Accept: true, Reason: fmt.Sprintf(format, args...)}
}

func reject(format string, args ...any) Decision {
	return Decision{Accept: false, Reason: fmt.Sprintf(format, args...)}
}

// NotNewer reports whether candidate is not a newer version than other
// under the policy (compared as its tag filter extracts them): an older or
// the same semantic version (Newest: the same tag), so it must not take
// over a rollout of other.
func (p Policy) NotNewer(other, candidate string) bool {
	if o, ok := p.version(other); ok {
		other = o
	}
	if c, ok := p.version(candidate); ok {
		candidate = c
	}
	return NotNewer(p.Track, other, candidate)
}

// NotNewer is Policy.NotNewer for a track alone.
func NotNewer(track Track, other, candidate string) bool {
	if track == Newest {
		return candidate == other
	}
	o, ok1 := parseVersion(other)
	c, ok2 := parseVersion(candidate)
	return ok1 && ok2 && c.compare(o) <= 0
}
