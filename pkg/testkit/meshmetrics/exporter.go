package meshmetrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Traffic is what a workload is said to serve.
type Traffic struct {
	// RequestsPerSecond is the request rate. Default 10.
	RequestsPerSecond float64
	// SuccessRate is the share of requests answered without a 5xx, 0 to 1.
	SuccessRate float64
	// Latency is every request's duration. Default 20ms.
	Latency time.Duration
}

// Healthy is traffic every built-in check passes: 10 requests a second,
// all successful, in 20 ms.
var Healthy = Traffic{RequestsPerSecond: 10, SuccessRate: 1, Latency: 20 * time.Millisecond}

// Failing is traffic whose success rate (50%) fails any usual threshold.
var Failing = Traffic{RequestsPerSecond: 10, SuccessRate: 0.5, Latency: 20 * time.Millisecond}

// Workload names a workload as the mesh labels it.
type Workload struct {
	Namespace, Name string
}

// series accumulates a workload's counters from its traffic over time, so
// that rate() over any window sees the traffic in force then.
type series struct {
	traffic        Traffic
	since          time.Time
	total, errored float64
}

func (s *series) advance(now time.Time) {
	dt := now.Sub(s.since).Seconds()
	if dt <= 0 {
		return
	}
	n := s.traffic.RequestsPerSecond * dt
	s.total += n
	s.errored += n * (1 - s.traffic.SuccessRate)
	s.since = now
}

// Exporter serves the metrics of the workloads set on it.
type Exporter struct {
	mu        sync.Mutex
	workloads map[Workload]*series
	now       func() time.Time

	srv  *http.Server
	addr string
}

// Start serves the metrics on a free port of 127.0.0.1, at /metrics.
func Start(ctx context.Context) (*Exporter, error) {
	e := &Exporter{workloads: map[Workload]*series{}, now: time.Now}
	reg := prometheus.NewRegistry()
	if err := reg.Register(e); err != nil {
		return nil, err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	e.addr = l.Addr().String()
	go func() {
		if err := e.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return e, nil
}

// Addr is the host:port the metrics are served on.
func (e *Exporter) Addr() string { return e.addr }

// Close stops serving.
func (e *Exporter) Close() error { return e.srv.Close() }

// Set says what the workload serves from now on; its counters keep what
// it served before.
func (e *Exporter) Set(w Workload, t Traffic) {
	if t.RequestsPerSecond == 0 {
		t.RequestsPerSecond = Healthy.RequestsPerSecond
	}
	if t.Latency == 0 {
		t.Latency = Healthy.Latency
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	s, ok := e.workloads[w]
	if !ok {
		e.workloads[w] = &series{traffic: t, since: now}
		return
	}
	s.advance(now)
	s.traffic = t
}

// Remove stops exporting the workload.
func (e *Exporter) Remove(w Workload) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.workloads, w)
}
