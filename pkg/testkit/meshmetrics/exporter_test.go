package meshmetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCounters checks that the counters carry the traffic in force over
// each stretch of time: 10 s healthy then 10 s failing is 200 requests, 50
// of them failed.
func TestCounters(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	now := t0
	e := &Exporter{workloads: map[Workload]*series{}, now: func() time.Time { return now }}
	w := Workload{Namespace: "demo", Name: "podinfo"}
	e.Set(w, Healthy)
	now = t0.Add(10 * time.Second)
	e.Set(w, Failing)
	now = t0.Add(20 * time.Second)
	want := `
# HELP istio_requests_total Requests, as Istio's proxies count them.
# TYPE istio_requests_total counter
istio_requests_total{destination_workload="podinfo",destination_workload_namespace="demo",reporter="destination",response_code="200"} 150
istio_requests_total{destination_workload="podinfo",destination_workload_namespace="demo",reporter="destination",response_code="500"} 50
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(want), "istio_requests_total"); err != nil {
		t.Error(err)
	}
	wantHTTP := `
# HELP http_request_duration_seconds Request durations, as the application's own instrumentation measures them.
# TYPE http_request_duration_seconds histogram
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.005"} 0
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.01"} 0
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.025"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.05"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.1"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.25"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="0.5"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="1"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="2.5"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="5"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="10"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200",le="+Inf"} 150
http_request_duration_seconds_sum{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200"} 3
http_request_duration_seconds_count{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="200"} 150
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.005"} 0
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.01"} 0
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.025"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.05"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.1"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.25"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="0.5"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="1"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="2.5"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="5"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="10"} 50
http_request_duration_seconds_bucket{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500",le="+Inf"} 50
http_request_duration_seconds_sum{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500"} 1
http_request_duration_seconds_count{kubernetes_namespace="demo",kubernetes_pod_name="podinfo-7d4b9c8f6d-x2x7q",status="500"} 50
`
	if err := testutil.CollectAndCompare(e, strings.NewReader(wantHTTP), "http_request_duration_seconds"); err != nil {
		t.Error(err)
	}
}
