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
	commitDelay time.Duration
	segmentSize int64
}

func defaultOptions() options {
	return options{
		logger:      slog.New(slog.DiscardHandler),
		now:         time.Now,
		lockTimeout: 2 * time.Second,
		commitDelay: DefaultCommitDelay,
		segmentSize: defaultSegmentSize,
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

// DefaultCommitDelay is how long, by default, the journal waits for more
// appends before a commit when appends are contending (see
// [WithCommitDelay]).
const DefaultCommitDelay = time.Millisecond

// WithCommitDelay sets how long the journal may wait for more appends before
// a commit while appends contend (the previous commit carried more than one
// Append); an idle store never waits. Fewer, fuller commits cost the disk and
// the kernel less per event. 0 turns the wait off. The default is
// [DefaultCommitDelay].
func WithCommitDelay(d time.Duration) Option {
	return func(o *options) {
		if d >= 0 {
			o.commitDelay = d
		}
	}
}

// WithSegmentSize sets the size from which the journal starts a new segment
// file, at most 1 GiB. The default is 64 MiB.
func WithSegmentSize(n int64) Option {
	return func(o *options) {
		if n > 0 {
			o.segmentSize = min(n, maxSegmentSize)
		}
	}
}
