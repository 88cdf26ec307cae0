package versionpolicy

import (
	"regexp"
	"strconv"
)

// versionRe matches the tag forms KubeCD recognises: X, X.Y, X.Y.Z, each
// optionally prefixed with "v".
var versionRe = regexp.MustCompile(`^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$`)

// preReleaseRe matches a recognised form followed by a semver pre-release, so
// that the rejection can say so rather than "not a semantic version".
var preReleaseRe = regexp.MustCompile(`^v?\d+(?:\.\d+){0,2}-[0-9A-Za-z.-]+$`)

// tagRe is the OCI distribution grammar for a tag.
var tagRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// version is a parsed release version; missing parts are 0.
type version struct{ major, minor, patch uint64 }

// parseVersion parses tag in one of the recognised forms. Leading zeros are
// tolerated (2024.01.15 is 2024.1.15) so that calendar versions work.
func parseVersion(tag string) (version, bool) {
	m := versionRe.FindStringSubmatch(tag)
	if m == nil {
		return version{}, false
	}
	var parts [3]uint64
	for i, s := range m[1:] {
		if s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil { // out of range
			return version{}, false
		}
		parts[i] = n
	}
	return version{parts[0], parts[1], parts[2]}, true
}

// compare returns -1, 0 or +1 as v is lower than, equal to or higher than w.
func (v version) compare(w version) int {
	for _, p := range [][2]uint64{{v.major, w.major}, {v.minor, w.minor}, {v.patch, w.patch}} {
		switch {
		case p[0] < p[1]:
			return -1
		case p[0] > p[1]:
			return 1
		}
	}
	return 0
}

// upgradeKind names the most significant part in which v differs from w:
// "major", "minor" or "patch". It assumes v != w.
func (v version) upgradeKind(w version) string {
	switch {
	case v.major != w.major:
		return "major"
	case v.minor != w.minor:
		return "minor"
	default:
		return "patch"
	}
}
