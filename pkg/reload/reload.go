package reload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Outcome is what became of a new configuration (the result label of
// flotilla_config_reloads_total).
type Outcome string

// Outcomes of Reload.
const (
	// Applied: the new configuration is in force.
	Applied Outcome = "applied"
	// Invalid: it did not load or validate; the running one stays.
	Invalid Outcome = "invalid"
	// RestartNeeded: it changes fields a running flotilla cannot take
	// live; none of it is applied, the running one stays.
	RestartNeeded Outcome = "restart_needed"
)

// Result is what Reload did.
type Result struct {
	Outcome Outcome
	// Err is why the configuration is invalid (Invalid).
	Err error
	// Fields are the fields that need a restart (RestartNeeded).
	Fields []string
	// Added, Removed and Changed are the applications the swap added,
	// removed and changed (Applied).
	Added, Removed, Changed []string
}

// Options configure a Reloader.
type Options struct {
	// Logger says what each reload did [none].
	Logger *slog.Logger
	// Metrics is where the reload metrics are registered [none].
	Metrics prometheus.Registerer
	// Now is the time of a reload [time.Now].
	Now func() time.Time
	// Follow is called with each configuration swapped in, once the Live
	// holds it, for the parts that keep what they made from it (the API's
	// applications and clusters, the clusters' clients), with what asked
	// for it (Reload's source) [none].
	Follow func(ctx context.Context, source string, next *config.Config)
	// Load builds the configuration from the file at path, for WatchFile
	// (with the management cluster's Application resources, their
	// source's Build: pkg/resources) [config.Load].
	Load func(path string) (*config.Config, error)
	// Guard refuses, as invalid, a valid configuration the running
	// flotilla cannot take now (an application removed while a rollout
	// of it is in flight) [none].
	Guard func(ctx context.Context, old, next *config.Config) error
}

// Reloader swaps new configurations into a Live, one at a time.
type Reloader struct {
	live *config.Live
	o    Options

	mu sync.Mutex // one reload at a time

	reloads    *prometheus.CounterVec
	successful prometheus.Gauge
	lastOK     prometheus.Gauge
}

// New returns a Reloader of live; the configuration live holds counts as
// the last one loaded successfully, now.
func New(live *config.Live, o Options) (*Reloader, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Load == nil {
		o.Load = config.Load
	}
	r := &Reloader{live: live, o: o,
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flotilla_config_reloads_total",
			Help: "Reloads of the configuration by result: applied, invalid (it did not load or validate: the running one stays), restart_needed (it changes fields that need a restart: none of it applied).",
		}, []string{"result"}),
		successful: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_config_last_reload_successful",
			Help: "Whether the last reload of the configuration was applied (1) or refused (0).",
		}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "flotilla_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration in force was loaded (at start-up, or by the last reload applied), in seconds since the epoch.",
		}),
	}
	for _, o := range []Outcome{Applied, Invalid, RestartNeeded} {
		r.reloads.WithLabelValues(string(o))
	}
	r.successful.Set(1)
	r.lastOK.Set(float64(o.Now().UnixNano()) / 1e9)
	if o.Metrics != nil {
		for _, c := range []prometheus.Collector{r.reloads, r.successful, r.lastOK} {
			if err := o.Metrics.Register(c); err != nil {
				return nil, fmt.Errorf("registering reload metrics: %w", err)
			}
		}
	}
	return r, nil
}

// Reload builds a configuration (for the file: config.Load, the
// validation `flotilla config check` runs) and swaps it in when it is
// valid and changes no field that needs a restart. Otherwise the
// configuration in force stays whole. source says what asked (the file's
// change, SIGHUP), for the log.
func (r *Reloader) Reload(ctx context.Context, source string, build func() (*config.Config, error)) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.live.Current()
	next, err := build()
	if err == nil && next == nil {
		err = errors.New("no configuration")
	}
	if err == nil && r.o.Guard != nil {
		err = r.o.Guard(ctx, old, next)
	}
	if err != nil {
		r.refused(Invalid)
		r.o.Logger.Error("configuration reload refused: invalid; the running configuration stays", "source", source, "error", err)
		return Result{Outcome: Invalid, Err: err}
	}
	if fields := config.RestartFields(old, next); len(fields) > 0 {
		r.refused(RestartNeeded)
		r.o.Logger.Error("configuration reload refused: these fields need a restart; nothing of it is applied, the running configuration stays",
			"source", source, "fields", fields)
		return Result{Outcome: RestartNeeded, Fields: fields}
	}
	res := Result{Outcome: Applied}
	res.Added, res.Removed, res.Changed = applicationChanges(old, next)
	r.live.Store(next)
	if r.o.Follow != nil {
		r.o.Follow(ctx, source, next)
	}
	r.reloads.WithLabelValues(string(Applied)).Inc()
	r.successful.Set(1)
	r.lastOK.Set(float64(r.o.Now().UnixNano()) / 1e9)
	r.o.Logger.Info("configuration reloaded", "source", source, "applications_added", res.Added,
		"applications_removed", res.Removed, "applications_changed", res.Changed,
		"clusters", len(next.Fleet.Clusters), "waves", len(next.Fleet.Waves))
	return res
}

func (r *Reloader) refused(o Outcome) {
	r.reloads.WithLabelValues(string(o)).Inc()
	r.successful.Set(0)
}

// applicationChanges names the applications of next that old has not,
// those of old that next has not, and those both have that differ.
func applicationChanges(old, next *config.Config) (added, removed, changed []string) {
	for _, a := range next.Applications {
		o, ok := old.Application(a.Name)
		switch {
		case !ok:
			added = append(added, a.Name)
		case !reflect.DeepEqual(o, a):
			changed = append(changed, a.Name)
		}
	}
	for _, a := range old.Applications {
		if _, ok := next.Application(a.Name); !ok {
			removed = append(removed, a.Name)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
