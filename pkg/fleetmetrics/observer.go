package fleetmetrics

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Journal is the journal the observer tails (pkg/store).
type Journal interface {
	// Read returns up to limit records after seq.
	Read(ctx context.Context, after uint64, limit int) ([]bus.Record, error)
	// Changed returns a channel closed at the next append.
	Changed() <-chan struct{}
	// LastSeq is the last record's position.
	LastSeq() uint64
	// Err says why the journal stopped taking appends, nil while it works.
	Err() error
}

// batch is how many records the observer reads at once.
const batch = 512

// sweepEvery is how often the observer forgets the timings of rollouts
// that ended unseen.
const sweepEvery = 10 * time.Minute

// scrapeTimeout bounds the state read of one scrape.
const scrapeTimeout = 5 * time.Second

// Buckets of the durations: a second to about nine hours.
var longBuckets = prometheus.ExponentialBuckets(1, 2, 16)

// Buckets of the reactions, with the targets (100 ms, 200 ms, 1 s) as
// bounds so that the share under a target is exact.
var reactionBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2.5, 5, 10, 30}

// inFlightPhases are the phases of rollouts in flight, always reported
// (0 when none is in them).
var inFlightPhases = []rollout.Phase{rollout.Progressing, rollout.Queued, rollout.Failed, rollout.RollbackFailed}

// Observer tails the journal and feeds the delivery metrics.
type Observer struct {
	j   Journal
	ros Rollouts
	log *slog.Logger
	d   *deriver
	// active tells whether this process reports the fleet's metrics
	// (WithActive); nil: always.
	active func() bool
	// seen is the position of the last record read.
	seen atomic.Uint64

	histograms map[string]*prometheus.HistogramVec
	counters   map[string]*prometheus.CounterVec
	phases     *prometheus.Desc
	idle       *prometheus.Desc
	overdue    *prometheus.Desc
	journalUp  *prometheus.Desc
}

// Option configures an Observer.
type Option func(*Observer)

// WithLogger sets the logger; default: discard.
func WithLogger(l *slog.Logger) Option { return func(o *Observer) { o.log = l } }

// WithClock sets the clock the observer forgets rollouts by; default
// time.Now (tests).
func WithClock(now func() time.Time) Option { return func(o *Observer) { o.d.now = now } }

// WithActive has the observer report the fleet's metrics only while
// active says so: in scale-out mode every replica reads the whole bus, and
// only the one holding partition 0 reports, so that a sum over replicas
// counts each rollout once. An inactive observer still follows the bus
// (its timings stay current, for when it becomes active) and reports its
// own journal's health.
func WithActive(active func() bool) Option { return func(o *Observer) { o.active = active } }

// New returns an observer of j reading rollouts from ros; its metrics are
// registered into reg.
func New(j Journal, ros Rollouts, reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	o := &Observer{
		j: j, ros: ros, log: slog.New(slog.DiscardHandler), d: newDeriver(ros, nil, 0),
		histograms: map[string]*prometheus.HistogramVec{
			MetricRolloutDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    MetricRolloutDuration,
				Help:    "Time from a rollout's start (or queueing) to its end, by application and final phase (Succeeded, RolledBack, Superseded).",
				Buckets: longBuckets,
			}, []string{"application", "phase"}),
			MetricWaveDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    MetricWaveDuration,
				Help:    "Time from a wave's start to its end (succeeded, bake included; or failed, the rollout failing during it), by application.",
				Buckets: longBuckets,
			}, []string{"application", "result"}),
			MetricPushToFleet: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    MetricPushToFleet,
				Help:    "Lead time: from the push (the sender's event time) to the rollout's success on the whole fleet, by application.",
				Buckets: longBuckets,
			}, []string{"application"}),
			MetricTimeToRestore: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    MetricTimeToRestore,
				Help:    "Time to restore: from the failure that started a rollback to the fleet back on its previous version (rolled back), by application.",
				Buckets: longBuckets,
			}, []string{"application"}),
			MetricReaction: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name:    MetricReaction,
				Help:    "flotilla's reaction latencies, one per cluster: push_to_first_apply (push -> each first-wave apply requested), wave_to_next_wave (last cluster of a wave succeeded, as Flagger reported it, or its bake's end -> each apply of the next wave requested), failure_to_rollback (the failure, as reported -> each revert of the rollback's first wave requested).",
				Buckets: reactionBuckets,
			}, []string{"step"}),
		},
		counters: map[string]*prometheus.CounterVec{
			MetricClusterResults: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricClusterResults,
				Help: "Cluster results of rollouts: succeeded, failed, reverted, revert_failed.",
			}, []string{"result"}),
			MetricRollbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricRollbacks,
				Help: "Rollbacks started (rollouts failed), by application and trigger: automatic (a cluster failed) or user (an abort, a rollback requested, a version quarantined).",
			}, []string{"application", "trigger"}),
			MetricPruned: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: MetricPruned,
				Help: "Objects deleted from clusters because a git application's commit no longer renders them, by application and purpose: prune (after a cluster's success) or revert (a rollback back to a commit without them).",
			}, []string{"application", "purpose"}),
		},
		phases: prometheus.NewDesc("flotilla_rollouts",
			"Rollouts in flight by phase (Progressing, Queued, Failed: rolling back, RollbackFailed), read from the state at scrape time.",
			[]string{"phase"}, nil),
		idle: prometheus.NewDesc("flotilla_rollout_idle_seconds",
			"Time since the in-flight rollout that changed least recently last changed, by phase (0 when none is in it), read from the state at scrape time.",
			[]string{"phase"}, nil),
		overdue: prometheus.NewDesc("flotilla_cluster_overdue_seconds",
			"How far past its deadline the most overdue cluster step under way is (an apply, an analysis, a revert; 0 when none is): its deadline timer should have decided it.",
			nil, nil),
		journalUp: prometheus.NewDesc("flotilla_journal_writable",
			"1 while the journal takes appends, 0 once it stopped (a write failed; /healthz fails and a restart recovers it).",
			nil, nil),
	}
	for _, opt := range opts {
		opt(o)
	}
	if reg == nil {
		return o, nil
	}
	cs := []prometheus.Collector{o}
	for _, c := range o.counters {
		cs = append(cs, c)
	}
	for _, h := range o.histograms {
		cs = append(cs, h)
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering delivery metrics: %w", err)
		}
	}
	return o, nil
}

// Describe implements prometheus.Collector for the gauges read at scrape
// time.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	ch <- o.phases
	ch <- o.idle
	ch <- o.overdue
	ch <- o.journalUp
}

// Collect reads the rollouts in flight and the journal's health.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	up := 1.0
	if o.j.Err() != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(o.journalUp, prometheus.GaugeValue, up)
	if !o.reporting() {
		return
	}
	// A scrape carries no context: the read gets a deadline of its own.
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	ros, err := o.ros.ListInFlight(ctx)
	if err != nil {
		o.log.Warn("delivery metrics: listing rollouts in flight", "error", err)
		return
	}
	now := o.d.now()
	counts, idle, overdue := map[rollout.Phase]int{}, map[rollout.Phase]float64{}, 0.0
	for _, ro := range ros {
		counts[ro.Phase]++
		idle[ro.Phase] = max(idle[ro.Phase], seconds(ro.Updated, now))
		for _, w := range ro.Waves {
			for _, c := range w.Clusters {
				switch c.Phase {
				case rollout.ClusterApplying, rollout.ClusterProgressing, rollout.ClusterReverting:
					if !c.Deadline.IsZero() {
						overdue = max(overdue, seconds(c.Deadline, now))
					}
				}
			}
		}
	}
	phases := inFlightPhases
	for p := range counts {
		if !slices.Contains(phases, p) { // a phase added later
			phases = append(slices.Clip(phases), p)
		}
	}
	for _, p := range phases {
		ch <- prometheus.MustNewConstMetric(o.phases, prometheus.GaugeValue, float64(counts[p]), string(p))
		ch <- prometheus.MustNewConstMetric(o.idle, prometheus.GaugeValue, idle[p], string(p))
	}
	ch <- prometheus.MustNewConstMetric(o.overdue, prometheus.GaugeValue, overdue)
}

// Run tails the journal from its end until ctx ends.
func (o *Observer) Run(ctx context.Context) error {
	sweep := time.NewTicker(sweepEvery)
	defer sweep.Stop()
	f := bus.Follower{Batch: batch, Stalled: func(err error, retryIn time.Duration) {
		o.log.Warn("delivery metrics: reading the journal; retrying", "error", err, "retry_in", retryIn)
	}}
	return f.Run(ctx, o.j, o.j.LastSeq(), func(ctx context.Context, recs []bus.Record) (uint64, error) {
		for _, rec := range recs {
			if rec.Err == nil {
				o.record(o.d.event(ctx, rec.Event))
			}
		}
		select {
		case <-sweep.C: // due, busy or not
			o.sweep(ctx)
		default:
		}
		o.seen.Store(recs[len(recs)-1].Seq)
		return recs[len(recs)-1].Seq, nil
	})
}

// Seen is the position of the last record the observer has read.
func (o *Observer) Seen() uint64 { return o.seen.Load() }

// sweep forgets the timings of rollouts no longer in flight that no event
// ended (queued ones aborted or superseded before they started).
func (o *Observer) sweep(ctx context.Context) {
	since := o.d.now().Add(-sweepEvery)
	ros, err := o.ros.ListInFlight(ctx)
	if err != nil {
		o.log.Warn("delivery metrics: listing rollouts in flight", "error", err)
		return
	}
	o.d.sweep(ros, since)
}

// reporting tells whether the observer reports the fleet's metrics now.
func (o *Observer) reporting() bool { return o.active == nil || o.active() }

func (o *Observer) record(obs []Observation) {
	if !o.reporting() {
		return
	}
	for _, ob := range obs {
		if h, ok := o.histograms[ob.Metric]; ok {
			h.WithLabelValues(ob.Labels...).Observe(ob.Value)
		} else if c, ok := o.counters[ob.Metric]; ok {
			c.WithLabelValues(ob.Labels...).Add(ob.Value)
		}
	}
}
