package events

import "github.com/flotilla-cd/flotilla/pkg/fault"

// Permanent marks err as permanent: retrying cannot fix it (bad input,
// forbidden, unknown). Everything else is retried. It is [fault.Permanent].
func Permanent(err error) error { return fault.Permanent(err) }

// IsPermanent tells whether err, or an error it wraps, is permanent. It is
// [fault.IsPermanent].
func IsPermanent(err error) bool { return fault.IsPermanent(err) }
