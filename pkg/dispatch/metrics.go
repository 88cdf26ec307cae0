package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

type metrics struct {
	calls       *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	processed   *prometheus.CounterVec
	stalls      prometheus.Counter
	quarantined prometheus.Counter
	inflight    *prometheus.GaugeVec
	timers      prometheus.Counter
	folded      *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_function_calls_total",
			Help: "Function invocations by function and outcome (ok, retryable, permanent).",
		}, []string{"function", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_function_duration_seconds",
			Help:    "Time a function took to handle one event.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"function"}),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_events_processed_total",
			Help: "Journaled events the dispatcher processed, by CloudEvents type (pushes, rollouts started, waves, cluster results, rollbacks...).",
		}, []string{"type"}),
		stalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_dispatch_stalls_total",
			Help: "Times the dispatcher stalled because the journal failed (a read, an append, a cursor save); it retries.",
		}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "flotilla_dispatch_events_in_flight",
			Help: "Journaled events read by the dispatcher and not yet handled (queued behind their key, running, or waiting for a retry), by lane: functions (the functions that move rollouts on) or pipelines (pipeline runs, each until its end or its deadline).",
		}, []string{"lane"}),
		timers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_timers_fired_total",
			Help: "Timer events (deadlines and the like) journaled when they fell due.",
		}),
		folded: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_function_folded_events",
			Help:    "Events of one key a function handled in one call (a burst of a rollout's canary events folded into one update of the rollout), by function.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9),
		}, []string{"function"}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_events_quarantined_total",
			Help: "Journal records the dispatcher set aside because they are not readable events (see dev.flotilla.event.quarantined.v1).",
		}),
	}
	if reg == nil {
		return m, nil
	}
	// The dispatchers of a replica's partitions (Shards) share them: a
	// collector registered already is the one to count on.
	var err error
	if m.calls, err = register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.processed, err = register(reg, m.processed); err != nil {
		return nil, err
	}
	if m.stalls, err = register(reg, m.stalls); err != nil {
		return nil, err
	}
	if m.quarantined, err = register(reg, m.quarantined); err != nil {
		return nil, err
	}
	if m.inflight, err = register(reg, m.inflight); err != nil {
		return nil, err
	}
	if m.timers, err = register(reg, m.timers); err != nil {
		return nil, err
	}
	if m.folded, err = register(reg, m.folded); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector registered already under
// its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("registering dispatcher metrics: %w", err)
	}
	return c, nil
}

func (m *metrics) observe(fn string, err error, d time.Duration) {
	outcome := "ok"
	switch {
	case fault.IsPermanent(err):
		outcome = "permanent"
	case err != nil:
		outcome = "retryable"
	}
	m.calls.WithLabelValues(fn, outcome).Inc()
	m.duration.WithLabelValues(fn).Observe(d.Seconds())
}
