package versionpolicy

import (
	"regexp"

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
