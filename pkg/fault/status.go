package fault

import (
	"errors"
	"net/http"
)

// Kinds of failure at the edge (the intake, the API). An error is of a kind
// when it wraps the kind (New makes one, or fmt.Errorf with %w).
var (
	ErrNotFound             = errors.New("not found")
	ErrMethodNotAllowed     = errors.New("method not allowed")
	ErrUnauthenticated      = errors.New("unauthenticated")
	ErrUnsupportedMediaType = errors.New("unsupported media type")
	ErrTooLarge             = errors.New("too large")
	ErrTimeout              = errors.New("timed out")
	ErrRateLimited          = errors.New("rate limited")
	ErrAuthRateLimited      = errors.New("too many unauthenticated requests")
	ErrBusy                 = errors.New("busy")
	ErrConflict             = errors.New("conflict")
	// ErrUpstream: a service flotilla asked on the caller's behalf (a
	// registry a refresh polls) failed or refused.
	ErrUpstream = errors.New("an upstream service failed")
	// ErrForbidden: the caller is known but may not do this (a control
	// from the web UI's session without its CSRF header).
	ErrForbidden = errors.New("forbidden")
)

// kindError is an error of a kind with its own message.
type kindError struct {
	kind error
	msg  string
}

func (e kindError) Error() string        { return e.msg }
func (e kindError) Is(target error) bool { return target == e.kind }

// New returns an error of kind kind whose message is msg (the kind's name
// is not appended).
func New(kind error, msg string) error { return kindError{kind, msg} }

// statusTable is the one table from a failure's kind to its HTTP status
// and the outcome label metrics count it under. The first match wins.
var statusTable = []struct {
	match   func(error) bool
	status  int
	outcome string
}{
	{is(ErrNotFound), http.StatusNotFound, "not_found"},
	{is(ErrMethodNotAllowed), http.StatusMethodNotAllowed, "method_not_allowed"},
	{is(ErrRateLimited), http.StatusTooManyRequests, "rate_limited"},
	{is(ErrAuthRateLimited), http.StatusTooManyRequests, "auth_rate_limited"},
	{is(ErrBusy), http.StatusServiceUnavailable, "busy"},
	{is(ErrTimeout), http.StatusRequestTimeout, "body_timeout"},
	{isTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{is(ErrUnauthenticated), http.StatusUnauthorized, "unauthenticated"},
	{is(ErrForbidden), http.StatusForbidden, "forbidden"},
	{is(ErrUnsupportedMediaType), http.StatusUnsupportedMediaType, "unsupported_media_type"},
	{is(ErrConflict), http.StatusConflict, "conflict"},
	{is(ErrUpstream), http.StatusBadGateway, "upstream_error"},
	{IsPermanent, http.StatusBadRequest, "malformed"},
}

func is(kind error) func(error) bool {
	return func(err error) bool { return errors.Is(err, kind) }
}

func isTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge) || errors.Is(err, ErrTooLarge)
}

// Status returns the HTTP status of err and its outcome label; ok is false
// for an error of no kind (a failure of flotilla or what it depends on:
// 503, retry).
func Status(err error) (status int, outcome string, ok bool) {
	for _, row := range statusTable {
		if row.match(err) {
			return row.status, row.outcome, true
		}
	}
	return http.StatusServiceUnavailable, "", false
}
