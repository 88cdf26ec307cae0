package store

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Option configures [Open].
type Option func(*options)

type options struct {
	logger      *slog.Logger
	registerer  prometheus.Registerer
	now         func() time.Time
	lockTimeout time.Duration
}

func defaultOptions() options {
	return options{
		logger:      slog.New(slog.DiscardHandler),
		now:         time.Now,
		lockTimeout: 2 * time.Second,
	}
}

// WithLogger sets the logger. The default discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// WithMetrics registers the store's metrics with r; they are unregistered on
// Close. The default, as is a nil r, is no metrics.
func WithMetrics(r prometheus.Registerer) Option {
	return func(o *options) { o.registerer = r }
}

// WithClock sets the clock that times appends for metrics. The default is
// time.Now.
func WithClock(now func() time.Time) Option {
	return func(o *options) {
		if now != nil {
			o.now = now
		}
	}
}

// WithLockTimeout sets how long Open waits for another process to release the
// file before failing. The default is 2s.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lockTimeout = d
		}
	}
}
