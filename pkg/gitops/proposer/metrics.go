package proposer

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// proposerMetrics count what became of pull requests and how long merges
// took.
type proposerMetrics struct {
	outcomes    *prometheus.CounterVec
	wait        *prometheus.HistogramVec
	mergeErrors *prometheus.CounterVec
}

// WithMetrics registers the proposer's metrics in reg.
func (p *Proposer) WithMetrics(reg prometheus.Registerer) (*Proposer, error) {
	m := &proposerMetrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_pullrequests_total",
			Help: "Pull requests' outcomes as the proposer found them (mode pullRequest), by host and outcome: open, merged, closed, unchanged, failed.",
		}, []string{"host", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flotilla_pullrequest_wait_seconds",
			Help:    "Time from a wave asking for its pull request until the proposer found it merged, by host.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 18), // 1 s .. 36 h
		}, []string{"host"}),
		mergeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_pullrequest_merge_errors_total",
			Help: "Times a git host answered flotilla's request to merge a pull request (autoMerge, reverts) with an error, by host.",
		}, []string{"host"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.outcomes, m.wait, m.mergeErrors} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("registering the proposer's metrics: %w", err)
			}
		}
	}
	p.metrics = m
	return p, nil
}

// observe counts a status, and a merge's wait since asked.
func (m *proposerMetrics) observe(host, state string, asked time.Time, now time.Time) {
	if m == nil || state == "" {
		return
	}
	m.outcomes.WithLabelValues(host, state).Inc()
	if state == "merged" && !asked.IsZero() && now.After(asked) {
		m.wait.WithLabelValues(host).Observe(now.Sub(asked).Seconds())
	}
}

// mergeFailed counts a host's error answer to a merge.
func (m *proposerMetrics) mergeFailed(host string) {
	if m != nil {
		m.mergeErrors.WithLabelValues(host).Inc()
	}
}
