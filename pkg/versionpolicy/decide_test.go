package versionpolicy

import (
	"errors"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		track     Track
		current   string
		candidate string
		want      Decision
	}{
		// PatchLevel: same major.minor, newer.
		{"patch accepts patch", PatchLevel, "1.2.4", "1.2.5",
			Decision{true, "1.2.5 is a patch upgrade of 1.2.4; track PatchLevel allows it"}},
		{"patch accepts seed example", PatchLevel, "5.7.14", "5.7.15",
			Decision{true, "5.7.15 is a patch upgrade of 5.7.14; track PatchLevel allows it"}},
		{"patch rejects seed example minor", PatchLevel, "5.7.14", "5.8.0",
			Decision{false, "5.8.0 is a minor upgrade of 5.7.14; track PatchLevel allows patch upgrades only"}},
		{"patch rejects minor", PatchLevel, "1.2.4", "1.3.0",
			Decision{false, "1.3.0 is a minor upgrade of 1.2.4; track PatchLevel allows patch upgrades only"}},
		{"patch rejects major", PatchLevel, "1.2.4", "2.0.0",
			Decision{false, "2.0.0 is a major upgrade of 1.2.4; track PatchLevel allows patch upgrades only"}},
		{"patch rejects older", PatchLevel, "1.2.4", "1.2.3",
			Decision{false, "1.2.3 is older than the current 1.2.4"}},
		{"patch rejects current", PatchLevel, "1.2.4", "1.2.4",
			Decision{false, "1.2.4 is the current version"}},
		{"patch from X.Y current", PatchLevel, "4.0", "4.0.1",
			Decision{true, "4.0.1 is a patch upgrade of 4.0; track PatchLevel allows it"}},
		{"patch X.Y to X.Y is minor", PatchLevel, "4.0", "4.1",
			Decision{false, "4.1 is a minor upgrade of 4.0; track PatchLevel allows patch upgrades only"}},
		{"patch from X current", PatchLevel, "4", "4.0.2",
			Decision{true, "4.0.2 is a patch upgrade of 4; track PatchLevel allows it"}},
		{"patch compares numerically", PatchLevel, "1.2.9", "1.2.10",
			Decision{true, "1.2.10 is a patch upgrade of 1.2.9; track PatchLevel allows it"}},

		// MinorVersion: same major, newer.
		{"minor accepts patch", MinorVersion, "1.2.4", "1.2.5",
			Decision{true, "1.2.5 is a patch upgrade of 1.2.4; track MinorVersion allows it"}},
		{"minor accepts minor", MinorVersion, "1.2.4", "1.3.0",
			Decision{true, "1.3.0 is a minor upgrade of 1.2.4; track MinorVersion allows it"}},
		{"minor accepts minor with lower patch", MinorVersion, "1.2.9", "1.10.0",
			Decision{true, "1.10.0 is a minor upgrade of 1.2.9; track MinorVersion allows it"}},
		{"minor rejects major", MinorVersion, "1.2.4", "2.0.0",
			Decision{false, "2.0.0 is a major upgrade of 1.2.4; track MinorVersion allows minor and patch upgrades only"}},
		{"minor rejects older minor", MinorVersion, "1.2.4", "1.1.9",
			Decision{false, "1.1.9 is older than the current 1.2.4"}},

		// MajorVersion: any newer.
		{"major accepts patch", MajorVersion, "1.2.4", "1.2.5",
			Decision{true, "1.2.5 is a patch upgrade of 1.2.4; track MajorVersion allows it"}},
		{"major accepts minor", MajorVersion, "1.2.4", "1.3.0",
			Decision{true, "1.3.0 is a minor upgrade of 1.2.4; track MajorVersion allows it"}},
		{"major accepts major", MajorVersion, "1.2.4", "2.0.0",
			Decision{true, "2.0.0 is a major upgrade of 1.2.4; track MajorVersion allows it"}},
		{"major compares numerically", MajorVersion, "9.0.0", "10.0.0",
			Decision{true, "10.0.0 is a major upgrade of 9.0.0; track MajorVersion allows it"}},
		{"major rejects older major", MajorVersion, "2.0.0", "1.9.9",
			Decision{false, "1.9.9 is older than the current 2.0.0"}},
		{"major rejects current", MajorVersion, "2.0.0", "2.0.0",
			Decision{false, "2.0.0 is the current version"}},
		{"major accepts calendar version", MajorVersion, "2024.01.15", "2024.02.01",
			Decision{true, "2024.02.01 is a minor upgrade of 2024.01.15; track MajorVersion allows it"}},

		// The v prefix and short forms.
		{"v prefix on both", PatchLevel, "v1.2.4", "v1.2.5",
			Decision{true, "v1.2.5 is a patch upgrade of v1.2.4; track PatchLevel allows it"}},
		{"v prefix on candidate only", MinorVersion, "1.2.4", "v1.3",
			Decision{true, "v1.3 is a minor upgrade of 1.2.4; track MinorVersion allows it"}},
		{"v prefix on current only", MajorVersion, "v1", "2",
			Decision{true, "2 is a major upgrade of v1; track MajorVersion allows it"}},
		{"same version other spelling", PatchLevel, "1.2.4", "v1.2.4",
			Decision{false, "v1.2.4 is the same version as the current 1.2.4"}},
		{"short form equals long form", PatchLevel, "1.2", "1.2.0",
			Decision{false, "1.2.0 is the same version as the current 1.2"}},
		{"capital V is not a prefix", PatchLevel, "1.2.4", "V1.2.5",
			Decision{false, `"V1.2.5" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},

		// Nothing deployed yet.
		{"first deploy patch track", PatchLevel, "", "1.2.4",
			Decision{true, "1.2.4 is a version and nothing is deployed yet"}},
		{"first deploy major track v prefix", MajorVersion, "", "v3",
			Decision{true, "v3 is a version and nothing is deployed yet"}},
		{"first deploy still needs a version", MinorVersion, "", "latest",
			Decision{false, `"latest" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"first deploy rejects pre-release", MajorVersion, "", "1.0.0-rc.1",
			Decision{false, "1.0.0-rc.1 is a pre-release; pre-releases roll out only with preReleases: true"}},

		// Tags the semantic tracks do not recognise.
		{"latest", PatchLevel, "1.2.4", "latest",
			Decision{false, `"latest" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"pre-release of a patch", PatchLevel, "1.2.4", "1.2.5-rc.1",
			Decision{false, "1.2.5-rc.1 is a pre-release; pre-releases roll out only with preReleases: true"}},
		{"pre-release with v", MajorVersion, "1.2.4", "v2.0.0-beta",
			Decision{false, "v2.0.0-beta is a pre-release; pre-releases roll out only with preReleases: true"}},
		{"four parts", MajorVersion, "1.2.4", "1.2.4.1",
			Decision{false, `"1.2.4.1" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"commit sha", MajorVersion, "1.2.4", "3f2a9c1",
			Decision{false, `"3f2a9c1" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"suffix", MinorVersion, "1.2.4", "1.3.0_alpine",
			Decision{false, `"1.3.0_alpine" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"empty candidate", PatchLevel, "1.2.4", "",
			Decision{false, `"" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"out of range number", MajorVersion, "1.2.4", "99999999999999999999",
			Decision{false, `"99999999999999999999" is not a semantic version (X, X.Y or X.Y.Z, optionally prefixed with v)`}},
		{"current not a version", MajorVersion, "latest", "1.2.4",
			Decision{false, `the current tag "latest" is not a semantic version; track MajorVersion cannot compare 1.2.4 with it`}},
		// The release after its release candidate is an upgrade (semver
		// precedence).
		{"current pre-release", PatchLevel, "1.2.4-rc.1", "1.2.4",
			Decision{true, "1.2.4 is a patch upgrade of 1.2.4-rc.1; track PatchLevel allows it"}},

		// Newest: the most recently pushed tag, whatever its version.
		{"newest accepts date tag", Newest, "v20170910-1100", "v20170911-0926",
			Decision{true, "v20170911-0926 is newer than the current v20170910-1100; track Newest follows the most recently pushed tag"}},
		{"newest accepts higher version", Newest, "1.2.4", "2.0.0",
			Decision{true, "2.0.0 is newer than the current 1.2.4; track Newest follows the most recently pushed tag"}},
		{"newest accepts lower version pushed later", Newest, "1.2.4", "1.2.3",
			Decision{true, "1.2.3 is newer than the current 1.2.4; track Newest follows the most recently pushed tag"}},
		{"newest accepts pre-release", Newest, "1.2.4", "1.3.0-rc.1",
			Decision{true, "1.3.0-rc.1 is newer than the current 1.2.4; track Newest follows the most recently pushed tag"}},
		{"newest accepts non-version", Newest, "1.2.4", "main-3f2a9c1",
			Decision{true, "main-3f2a9c1 is newer than the current 1.2.4; track Newest follows the most recently pushed tag"}},
		{"newest rejects current tag", Newest, "v20170911-0926", "v20170911-0926",
			Decision{false, "v20170911-0926 is the current tag"}},
		{"newest first deploy", Newest, "", "latest",
			Decision{true, "latest is the newest tag and nothing is deployed yet; track Newest follows the most recently pushed tag"}},
		{"newest rejects invalid tag", Newest, "1.2.4", "-bad",
			Decision{false, `"-bad" is not a valid image tag`}},
		{"newest rejects empty tag", Newest, "1.2.4", "",
			Decision{false, `"" is not a valid image tag`}},
		{"newest rejects plus", Newest, "1.2.4", "1.2.5+build",
			Decision{false, `"1.2.5+build" is not a valid image tag`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decide(tt.track, tt.current, tt.candidate)
			if err != nil {
				t.Fatalf("Decide(%q, %q, %q): %v", tt.track, tt.current, tt.candidate, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide(%q, %q, %q) mismatch (-want +got):\n%s", tt.track, tt.current, tt.candidate, diff)
			}
		})
	}
}

func TestDecideUnknownTrack(t *testing.T) {
	for _, track := range []Track{"", "Latest", "patchlevel", "Semver"} {
		t.Run(string(track), func(t *testing.T) {
			got, err := Decide(track, "1.2.4", "1.2.5")
			if err == nil {
				t.Fatalf("Decide(%q) = %+v, want an error", track, got)
			}
			if !errors.Is(err, ErrUnknownTrack) {
				t.Errorf("Decide(%q) error %v does not wrap ErrUnknownTrack", track, err)
			}
			if !fault.IsPermanent(err) {
				t.Errorf("Decide(%q) error %v is not permanent", track, err)
			}
		})
	}
}

// TestTrackValues pins the configuration spellings shared with pkg/config.
func TestTrackValues(t *testing.T) {
	got := []string{string(PatchLevel), string(MinorVersion), string(MajorVersion), string(Newest)}
	want := []string{"PatchLevel", "MinorVersion", "MajorVersion", "Newest"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("track values mismatch (-want +got):\n%s", diff)
	}
}

func TestNotNewer(t *testing.T) {
	tests := []struct {
		track            Track
		other, candidate string
		want             bool
	}{
		{MinorVersion, "1.1.0", "1.0.1", true},
		{MinorVersion, "1.1.0", "1.1.0", true},
		{MinorVersion, "1.1.0", "v1.1", true},
		{MinorVersion, "1.1.0", "1.2.0", false},
		{PatchLevel, "1.1.0", "2.0.0", false},
		{MinorVersion, "latest", "1.0.0", false},
		{Newest, "a", "a", true},
		{Newest, "b", "a", false},
	}
	for _, tt := range tests {
		if got := NotNewer(tt.track, tt.other, tt.candidate); got != tt.want {
			t.Errorf("NotNewer(%s, %s, %s) = %v, want %v", tt.track, tt.other, tt.candidate, got, tt.want)
		}
	}
}

// A policy's semver constraint (Masterminds/semver) narrows a semantic
// track; pre-releases roll out only when the policy opts in.
func TestPolicy(t *testing.T) {
	tests := []struct {
		name      string
		p         Policy
		current   string
		candidate string
		want      Decision
	}{
		{"inside the constraint", Policy{Track: MajorVersion, Constraint: ">=1.2, <2"}, "1.2.0", "1.9.0",
			Decision{true, "1.9.0 is a minor upgrade of 1.2.0; track MajorVersion allows it"}},
		{"outside the constraint", Policy{Track: MajorVersion, Constraint: ">=1.2, <2"}, "1.2.0", "2.0.0",
			Decision{false, `2.0.0 does not satisfy the constraint ">=1.2, <2"`}},
		{"tilde", Policy{Track: MajorVersion, Constraint: "~1.4"}, "1.4.0", "1.5.0",
			Decision{false, `1.5.0 does not satisfy the constraint "~1.4"`}},
		{"pre-release refused by default", Policy{Track: MinorVersion}, "1.2.0", "1.3.0-rc.1",
			Decision{false, "1.3.0-rc.1 is a pre-release; pre-releases roll out only with preReleases: true"}},
		{"pre-release opted in", Policy{Track: MinorVersion, PreReleases: true}, "1.2.0", "1.3.0-rc.1",
			Decision{true, "1.3.0-rc.1 is a minor upgrade of 1.2.0; track MinorVersion allows it"}},
		{"pre-release opted in, with a constraint", Policy{Track: MajorVersion, Constraint: ">=1.2, <2", PreReleases: true}, "1.2.0", "1.3.0-rc.1",
			Decision{true, "1.3.0-rc.1 is a minor upgrade of 1.2.0; track MajorVersion allows it"}},
		{"rc after rc", Policy{Track: PatchLevel, PreReleases: true}, "1.3.0-rc.1", "1.3.0-rc.2",
			Decision{true, "1.3.0-rc.2 is a patch upgrade of 1.3.0-rc.1; track PatchLevel allows it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Decide(tt.current, tt.candidate)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
	if err := (Policy{Track: MinorVersion, Constraint: ">=>1"}).Check(); !fault.IsPermanent(err) {
		t.Errorf("Check of a bad constraint = %v, want a permanent error", err)
	}
}

// A tag filter admits only the tags it matches, and what it extracts is
// the version compared (Flux's filterTags).
func TestPolicyTagFilter(t *testing.T) {
	p := Policy{Track: MinorVersion, Filter: regexp.MustCompile(`^release-(?P<version>[0-9.]+)-[a-f0-9]+$`), Extract: "$version"}
	tests := []struct {
		current, candidate string
		want               Decision
	}{
		{"release-1.2.0-abc123", "release-1.3.0-def456", Decision{true, "1.3.0 is a minor upgrade of 1.2.0; track MinorVersion allows it"}},
		{"release-1.2.0-abc123", "release-1.1.0-def456", Decision{false, "1.1.0 is older than the current 1.2.0"}},
		{"release-1.2.0-abc123", "main-1.3.0-def456", Decision{false, `main-1.3.0-def456 does not match the tag filter "^release-(?P<version>[0-9.]+)-[a-f0-9]+$"`}},
		{"", "release-1.0.0-a1", Decision{true, "1.0.0 is a version and nothing is deployed yet"}},
	}
	for _, tt := range tests {
		got, err := p.Decide(tt.current, tt.candidate)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Decide(%s, %s) (-want +got):\n%s", tt.current, tt.candidate, diff)
		}
	}
}
