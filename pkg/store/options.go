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
	retention   time.Duration
	dedupe      time.Duration
	dedupeMax   int
	compactEach time.Duration
	// clock dates segments and ids for retention and the dedupe window
	// (real time; tests inside the package move it).
	clock func() time.Time
	// noSync: nothing is synced (WithoutSync).
	noSync bool
}

// WithoutSync has the store write without syncing: neither the journal nor
// the documents are flushed to the disk, so a crash of the machine may lose
// what the store acknowledged. Only for a store thrown away at exit:
// `flotilla simulate`, whose every rollout otherwise waited for thousands of
// syncs it does not need (a simulated wave of 1,000 clusters).
func WithoutSync() Option {
	return func(o *options) { o.noSync = true }
}

func defaultOptions() options {
	return options{
		logger:      slog.New(slog.DiscardHandler),
		now:         time.Now,
		lockTimeout: 2 * time.Second,
		commitDelay: DefaultCommitDelay,
		segmentSize: defaultSegmentSize,
		retention:   DefaultRetention,
		dedupe:      DefaultDedupeWindow,
		dedupeMax:   DefaultDedupeMaxEvents,
		compactEach: time.Minute,
		clock:       time.Now,
	}
}

// withBoundsClock sets the clock of retention and the dedupe window.
func withBoundsClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
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

// Defaults of the journal's bounds.
const (
	// DefaultRetention is how long, by default, the journal keeps events
	// that every consumer has handled (Kafka's default, a week).
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultDedupeWindow is how long, by default, an event id is
	// remembered, so that the same event delivered again is dropped.
	DefaultDedupeWindow = 24 * time.Hour
	// DefaultDedupeMaxEvents bounds, by default, how many event ids are
	// remembered (about 30 MB of memory).
	DefaultDedupeMaxEvents = 1_000_000
)

// WithRetention sets how long the journal keeps events: a segment whose
// last record was written longer ago than d, and whose records every
// consumer's cursor has passed, is deleted. A consumer that stops moving
// holds retention back (Compact reports it, and it is logged). 0 keeps
// every event forever. The default is [DefaultRetention].
func WithRetention(d time.Duration) Option {
	return func(o *options) {
		if d >= 0 {
			o.retention = d
		}
	}
}

// WithDedupeWindow bounds the ids the journal remembers to drop a repeated
// event: those of events written in the last d, and at most maxEvents of
// them (0: no bound by number), both a segment at a time, so an id is
// remembered for at least d unless more than maxEvents events came since.
// An event delivered again after it is forgotten is journaled again. The
// defaults are [DefaultDedupeWindow] and [DefaultDedupeMaxEvents].
func WithDedupeWindow(d time.Duration, maxEvents int) Option {
	return func(o *options) {
		if d > 0 {
			o.dedupe = d
		}
		if maxEvents >= 0 {
			o.dedupeMax = maxEvents
		}
	}
}

// WithCompactInterval sets how often the store applies retention and the
// dedupe window in the background. The default is a minute, or the
// journal's roll-over time if shorter (see rollAfter).
func WithCompactInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.compactEach = d
		}
	}
}

// rollAfter is how long the journal writes one segment before starting
// the next, so that a quiet journal still retires segments: a quarter of
// the shorter of the retention and the dedupe window, at least a second.
func (o options) rollAfter() time.Duration {
	d := o.dedupe
	if o.retention > 0 {
		d = min(d, o.retention)
	}
	return max(d/4, time.Second)
}
