package versionpolicy

import (
	"regexp"
	"slices"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// tagRe is the OCI distribution grammar for a tag.
var tagRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// version is a parsed version (Masterminds/semver: X, X.Y or X.Y.Z,
// optionally prefixed with v, with a pre-release and build metadata).
type version struct{ *semver.Version }

// parseVersion parses tag as a version. Leading zeros are tolerated
// (2024.01.15 is 2024.1.15) so that calendar versions work.
func parseVersion(tag string) (version, bool) {
	v, err := semver.NewVersion(tag)
	if err != nil {
		return version{}, false
	}
	return version{v}, true
}

// compare returns -1, 0 or +1 as v is lower than, equal to or higher than w
// (semver precedence: a pre-release is lower than its release).
func (v version) compare(w version) int { return v.Compare(w.Version) }

// preRelease reports whether v is a pre-release.
func (v version) preRelease() bool { return v.Prerelease() != "" }

// upgradeKind names the most significant part in which v differs from w:
// "major", "minor" or "patch" (a pre-release of the same X.Y.Z counts as
// a patch). It assumes v != w.
func (v version) upgradeKind(w version) string {
	switch {
	case v.Major() != w.Major():
		return "major"
	case v.Minor() != w.Minor():
		return "minor"
	default:
		return "patch"
	}
}

// NewestFirst orders tags newest first: semantic versions by precedence,
// then the others in reverse lexicographic order (dates and timestamps
// newest first); at most n.
func NewestFirst(tags []string, n int) []string {
	type tv struct {
		tag string
		v   *semver.Version
	}
	vs := make([]tv, 0, len(tags))
	for _, t := range tags {
		v, _ := parseVersion(t) // nil when t is no version
		vs = append(vs, tv{t, v.Version})
	}
	slices.SortFunc(vs, func(a, b tv) int {
		switch {
		case a.v != nil && b.v != nil:
			if c := b.v.Compare(a.v); c != 0 {
				return c
			}
		case a.v != nil:
			return -1
		case b.v != nil:
			return 1
		}
		return strings.Compare(b.tag, a.tag)
	})
	out := make([]string, 0, min(n, len(vs)))
	for _, x := range vs[:min(n, len(vs))] {
		out = append(out, x.tag)
	}
	return out
}
