package store

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the journal's collectors. A nil *metrics records nothing.
type metrics struct {
	reg        prometheus.Registerer
	events     prometheus.Counter
	duplicates prometheus.Counter
	appendDur  prometheus.Histogram
	size       prometheus.GaugeFunc
	segments   prometheus.GaugeFunc
	first      prometheus.GaugeFunc
	ids        prometheus.GaugeFunc
	deleted    prometheus.Counter
	forgotten  prometheus.Counter
}

// gauges are the functions the store's gauges read.
type gauges struct {
	size, segments, first, ids func() float64
}

func (s *Store) gauges() gauges {
	return gauges{
		size: func() float64 {
			n, err := s.Size()
			if err != nil {
				return 0
			}
			return float64(n)
		},
		segments: func() float64 { return float64(len(s.journal.segments())) },
		first:    func() float64 { return float64(s.journal.first()) },
		ids:      func() float64 { return float64(s.DedupeIDs()) },
	}
}

func newMetrics(reg prometheus.Registerer, g gauges) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		reg: reg,
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_journal_events_total",
			Help: "Events appended to the journal.",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_journal_duplicates_total",
			Help: "Events not appended because their id was already journaled.",
		}),
		appendDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flotilla_journal_append_seconds",
			Help:    "Time for an Append call to make its events durable.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. ~4s
		}),
		size: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flotilla_journal_size_bytes",
			Help: "Size of the store on disk in bytes: the journal's records and the state file.",
		}, g.size),
		segments: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flotilla_journal_segments",
			Help: "Segment files of the journal.",
		}, g.segments),
		first: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flotilla_journal_first_seq",
			Help: "Sequence number of the oldest event the journal keeps (retention deletes older ones).",
		}, g.first),
		ids: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "flotilla_journal_dedupe_ids",
			Help: "Event ids the dedupe index remembers (bounded by server.dedupeWindow and server.dedupeMaxEvents).",
		}, g.ids),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_journal_retired_events_total",
			Help: "Events deleted from the journal by retention.",
		}),
		forgotten: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "flotilla_journal_dedupe_forgotten_total",
			Help: "Event ids that left the dedupe window.",
		}),
	}
	var registered []prometheus.Collector
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			for _, r := range registered {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
		registered = append(registered, c)
	}
	return m, nil
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.events, m.duplicates, m.appendDur, m.size, m.segments, m.first, m.ids, m.deleted, m.forgotten}
}

func (m *metrics) unregister() {
	if m == nil {
		return
	}
	for _, c := range m.collectors() {
		m.reg.Unregister(c)
	}
}

// committed counts a commit's events, including those of callers that gave up
// waiting.
func (m *metrics) committed(added, dups int) {
	if m == nil {
		return
	}
	m.events.Add(float64(added))
	m.duplicates.Add(float64(dups))
}

func (m *metrics) appendTook(seconds float64) {
	if m == nil {
		return
	}
	m.appendDur.Observe(seconds)
}

// compacted counts what a compaction removed.
func (m *metrics) compacted(r CompactReport) {
	if m == nil {
		return
	}
	m.deleted.Add(float64(r.EventsDeleted))
	m.forgotten.Add(float64(r.IDsForgotten))
}
