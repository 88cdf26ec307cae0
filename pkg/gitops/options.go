package gitops

import (
	"context"
	"math/rand/v2"
	"time"
)

// Defaults of the Options.
const (
	DefaultAttempts   = 10
	DefaultBackoff    = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Option configures Bump.
type Option func(*options)

type options struct {
	attempts        int
	backoff, maxOff time.Duration
	now             func() time.Time
	// beforePush runs between the commit and the push of each attempt; tests
	// use it to make the branch move under the bump.
	beforePush func(ctx context.Context, attempt int)
}

func newOptions(opts []Option) options {
	o := options{attempts: DefaultAttempts, backoff: DefaultBackoff, maxOff: DefaultMaxBackoff, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithAttempts bounds how many times Bump pushes when the branch keeps
// moving under it (each attempt re-applies the edits on the new head).
// Default DefaultAttempts; values below 1 mean 1.
func WithAttempts(n int) Option {
	return func(o *options) { o.attempts = max(n, 1) }
}

// WithBackoff sets the wait before attempt n+1: base doubled per attempt,
// capped at maxWait, jittered to between half and all of that. Default
// DefaultBackoff and DefaultMaxBackoff.
func WithBackoff(base, maxWait time.Duration) Option {
	return func(o *options) { o.backoff, o.maxOff = max(base, 0), max(maxWait, base, 0) }
}

// WithClock sets the clock that dates commits. Default time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// wait sleeps before the attempt after attempt, or returns ctx's error.
func (o options) wait(ctx context.Context, attempt int) error {
	d := o.backoff
	for i := 1; i < attempt && d < o.maxOff; i++ {
		d *= 2
	}
	d = min(d, o.maxOff)
	if d > 1 {
		d = d/2 + rand.N(d/2) // jitter spreads retries that collided
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
