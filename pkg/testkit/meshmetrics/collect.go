package meshmetrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// podSuffix makes a pod name of a workload's, as a ReplicaSet names its
// pods: Flagger's kubernetes and Gateway API queries match
// "<target>-<hash>-<id>".
const podSuffix = "-7d4b9c8f6d-x2x7q"

var (
	istioRequests = prometheus.NewDesc("istio_requests_total", "Requests, as Istio's proxies count them.",
		[]string{"reporter", "destination_workload_namespace", "destination_workload", "response_code"}, nil)
	istioDuration = prometheus.NewDesc("istio_request_duration_milliseconds", "Request durations, as Istio's proxies measure them.",
		[]string{"reporter", "destination_workload_namespace", "destination_workload"}, nil)
	httpDuration = prometheus.NewDesc("http_request_duration_seconds", "Request durations, as the application's own instrumentation measures them.",
		[]string{"kubernetes_namespace", "kubernetes_pod_name", "status"}, nil)

	istioBuckets = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
	httpBuckets  = prometheus.DefBuckets
)

// Describe sends the descriptors of every metric.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- istioRequests
	ch <- istioDuration
	ch <- httpDuration
}

// Collect sends every workload's series as they stand now.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for w, s := range e.workloads {
		s.advance(now)
		ok, failed := s.total-s.errored, s.errored
		ch <- prometheus.MustNewConstMetric(istioRequests, prometheus.CounterValue, ok, "destination", w.Namespace, w.Name, "200")
		ch <- prometheus.MustNewConstMetric(istioRequests, prometheus.CounterValue, failed, "destination", w.Namespace, w.Name, "500")
		ms := float64(s.traffic.Latency.Milliseconds())
		ch <- prometheus.MustNewConstHistogram(istioDuration, uint64(s.total), s.total*ms, buckets(istioBuckets, ms, s.total),
			"destination", w.Namespace, w.Name)
		sec := s.traffic.Latency.Seconds()
		pod := w.Name + podSuffix
		ch <- prometheus.MustNewConstHistogram(httpDuration, uint64(ok), ok*sec, buckets(httpBuckets, sec, ok), w.Namespace, pod, "200")
		ch <- prometheus.MustNewConstHistogram(httpDuration, uint64(failed), failed*sec, buckets(httpBuckets, sec, failed), w.Namespace, pod, "500")
	}
}

// buckets puts n observations of value v in cumulative buckets.
func buckets(bounds []float64, v, n float64) map[float64]uint64 {
	out := make(map[float64]uint64, len(bounds))
	for _, b := range bounds {
		if v <= b {
			out[b] = uint64(n)
		} else {
			out[b] = 0
		}
	}
	return out
}
