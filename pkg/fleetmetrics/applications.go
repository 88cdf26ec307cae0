package fleetmetrics

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// MetricWebhookSilent is 1 for an application whose webhook is silent: a
// poll found a version no webhook announced (rollout.AppState.Saw), until
// a webhook of the application arrives again; 0 otherwise.
const MetricWebhookSilent = "flotilla_application_webhook_silent"

// Apps reads what flotilla knows of an application (pkg/state).
type Apps interface {
	App(ctx context.Context, name string) (rollout.AppState, error)
}

// Silence reports MetricWebhookSilent of the configured applications,
// read from the state at scrape time, so it is the same after a restart
// and on every replica.
type Silence struct {
	apps   Apps
	names  []string
	active func() bool
	log    *slog.Logger
	desc   *prometheus.Desc
}

// NewSilence registers MetricWebhookSilent of the applications names into
// reg, read from apps; active (nil: always) says whether this process
// reports it (in scale-out mode the holder of partition 0, as the other
// fleet metrics: WithActive); log (nil: none) the reads that failed.
func NewSilence(apps Apps, names []string, reg prometheus.Registerer, active func() bool, log *slog.Logger) (*Silence, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Silence{apps: apps, names: names, active: active, log: log,
		desc: prometheus.NewDesc(MetricWebhookSilent,
			"1 while an application's webhook is silent: a poll found a version no webhook announced (event application.webhook.missed); 0 once a webhook of the application arrives again. Read from the state at scrape time.",
			[]string{"application"}, nil)}
	if reg != nil {
		if err := reg.Register(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Describe implements prometheus.Collector.
func (s *Silence) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// Collect implements prometheus.Collector.
func (s *Silence) Collect(ch chan<- prometheus.Metric) {
	if s.active != nil && !s.active() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for _, name := range s.names {
		st, err := s.apps.App(ctx, name)
		if err != nil {
			s.log.Warn("webhook silence metric: reading the application", "application", name, "error", err)
			continue
		}
		v := 0.0
		if st.WebhookSilent != nil {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, v, name)
	}
}
