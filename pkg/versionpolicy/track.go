package versionpolicy

import (
	"errors"
	"fmt"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Track names an upgrade policy. The values are the plain strings used in
// configuration (pkg/config spells the same ones).
type Track string

// The supported tracks.
const (
	// PatchLevel upgrades on patch level updates only: same major.minor.
	PatchLevel Track = "PatchLevel"
	// MinorVersion upgrades on minor version or patch level updates: same major.
	MinorVersion Track = "MinorVersion"
	// MajorVersion upgrades on major, minor or patch level updates.
	MajorVersion Track = "MajorVersion"
	// Newest upgrades to the most recently created tag, whatever its version.
	Newest Track = "Newest"
)

// ErrUnknownTrack is wrapped by the (permanent) error Decide returns for a
// track it does not know.
var ErrUnknownTrack = errors.New("unknown track")

// check returns a permanent error wrapping ErrUnknownTrack if t is not one of
// the supported tracks.
func (t Track) check() error {
	switch t {
	case PatchLevel, MinorVersion, MajorVersion, Newest:
		return nil
	}
	return fault.Permanent(fmt.Errorf("%w %q (want %s, %s, %s or %s)",
		ErrUnknownTrack, string(t), PatchLevel, MinorVersion, MajorVersion, Newest))
}

// allows says which upgrade kinds the semantic track t accepts, for reasons.
func (t Track) allows() string {
	switch t {
	case PatchLevel:
		return "patch upgrades only"
	case MinorVersion:
		return "minor and patch upgrades only"
	default:
		return "major, minor and patch upgrades"
	}
}
