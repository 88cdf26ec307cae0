package fault

import "errors"

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent tells whether err, or an error it wraps, is permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}
