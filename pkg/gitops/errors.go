package gitops

import (
	"errors"
	"fmt"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Sentinel errors, tested with errors.Is. All but ErrConflict come wrapped as
// permanent errors.
var (
	// ErrInvalid is a Repo, Change or Image that cannot be used as given.
	ErrInvalid = errors.New("invalid bump")
	// ErrFileNotFound is a file to edit that the branch does not have.
	ErrFileNotFound = errors.New("file not found")
	// ErrInvalidYAML is a file that does not parse as YAML, or whose shape
	// is not the one the edit expects (a kustomization that is not a mapping).
	ErrInvalidYAML = errors.New("invalid yaml")
	// ErrPathNotFound is a YAML path the file does not have.
	ErrPathNotFound = errors.New("path not found")
	// ErrNotScalar is a YAML path that leads to a mapping, a sequence, an
	// alias or a block scalar where a single-line or quoted scalar is needed.
	ErrNotScalar = errors.New("not a scalar")
	// ErrNoMatch is a manifest with no container running the image's
	// repository, or a Helm repository that does not fit image.prefix.
	ErrNoMatch = errors.New("image not found")
	// ErrAccess is a repository or branch that does not exist or refuses the
	// credentials.
	ErrAccess = errors.New("repository, branch or credentials rejected")
	// ErrConflict is a push still rejected because the branch moved, after
	// every attempt. It is not permanent: a later retry may well get through.
	ErrConflict = errors.New("branch kept moving")
)

// IsPermanent tells whether err, or an error it wraps, is permanent: retrying
// the same bump cannot succeed. It agrees with fault.IsPermanent.
func IsPermanent(err error) bool { return fault.IsPermanent(err) }

// permanentf formats an error and marks it permanent.
func permanentf(format string, args ...any) error {
	return fault.Permanent(fmt.Errorf(format, args...))
}
