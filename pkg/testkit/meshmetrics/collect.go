package meshmetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// podSuffix makes a pod name of a workload's, as a ReplicaSet names its
// pods: Flagger's kubernetes and Gateway API queries match
// "<target>-<hash>-<id>".
const podSuffix = "-7d4b9c8f6d-x2x7q"

// servicePort is the port of the canary's service, which contour, traefik,
// kuma and ingress-nginx put in the name of the upstream they count its
// requests under (podinfo's).
const servicePort = "9898"

var (
	istioRequests = prometheus.NewDesc("istio_requests_total", "Requests, as Istio's proxies count them.",
		[]string{"reporter", "destination_workload_namespace", "destination_workload", "response_code"}, nil)
	istioDuration = prometheus.NewDesc("istio_request_duration_milliseconds", "Request durations, as Istio's proxies measure them.",
		[]string{"reporter", "destination_workload_namespace", "destination_workload"}, nil)
	httpDuration = prometheus.NewDesc("http_request_duration_seconds", "Request durations, as the application's own instrumentation measures them.",
		[]string{"kubernetes_namespace", "kubernetes_pod_name", "status"}, nil)

	// Linkerd's proxies count the responses of the pods of a deployment.
	linkerdResponses = prometheus.NewDesc("response_total", "Responses, as Linkerd's proxies count them.",
		[]string{"namespace", "deployment", "direction", "classification", "status_code"}, nil)
	linkerdLatency = prometheus.NewDesc("response_latency_ms", "Response latencies, as Linkerd's proxies measure them.",
		[]string{"namespace", "deployment", "direction"}, nil)

	// Envoy's cluster stats, for contour (envoy_cluster_name
	// "<namespace>_<service>_<port>") and kuma (service
	// "<service>_<namespace>_svc_<port>"); one name, so one set of labels,
	// the ones a mesh does not set left empty (absent in Prometheus).
	envoyRequests = prometheus.NewDesc("envoy_cluster_upstream_rq", "Upstream requests, as Envoy counts them.",
		[]string{"envoy_cluster_name", "service", "envoy_response_code"}, nil)
	envoyTime = prometheus.NewDesc("envoy_cluster_upstream_rq_time", "Upstream request times, as Envoy measures them.",
		[]string{"envoy_cluster_name", "service"}, nil)

	traefikRequests = prometheus.NewDesc("traefik_service_requests_total", "Requests, as Traefik counts them per service.",
		[]string{"service", "code", "method", "protocol"}, nil)
	traefikDuration = prometheus.NewDesc("traefik_service_request_duration_seconds", "Request durations, as Traefik measures them per service.",
		[]string{"service", "code", "method", "protocol"}, nil)

	// ingress-nginx labels a request to a canary Ingress's backend with the
	// canary upstream's name; the main Ingress's requests have none.
	nginxRequests = prometheus.NewDesc("nginx_ingress_controller_requests", "Requests, as ingress-nginx counts them.",
		[]string{"namespace", "ingress", "service", "canary", "status"}, nil)
	nginxResponseDuration = prometheus.NewDesc("nginx_ingress_controller_response_duration_seconds", "Upstream response times, as ingress-nginx measures them.",
		[]string{"namespace", "ingress", "service", "canary", "status"}, nil)
	nginxRequestDuration = prometheus.NewDesc("nginx_ingress_controller_request_duration_seconds", "Request processing times, as ingress-nginx measures them.",
		[]string{"namespace", "ingress", "service", "canary", "status"}, nil)

	istioBuckets   = []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
	httpBuckets    = prometheus.DefBuckets
	linkerdBuckets = []float64{1, 2, 3, 4, 5, 10, 20, 30, 40, 50, 100, 200, 300, 400, 500, 1000, 2000, 3000, 4000, 5000, 10000, 20000, 30000, 40000, 50000}
	envoyBuckets   = []float64{0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000}
	traefikBuckets = []float64{0.1, 0.3, 1.2, 5}
	nginxBuckets   = prometheus.DefBuckets
)

// Describe sends the descriptors of every metric.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{istioRequests, istioDuration, httpDuration,
		linkerdResponses, linkerdLatency, envoyRequests, envoyTime, traefikRequests, traefikDuration,
		nginxRequests, nginxResponseDuration, nginxRequestDuration} {
		ch <- d
	}
}

// Collect sends every workload's series as they stand now.
func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	for w, s := range e.workloads {
		s.advance(now)
		c := counts{ok: s.total - s.errored, failed: s.errored, latency: s.traffic.Latency.Seconds()}
		collectIstio(ch, w, c)
		collectLinkerd(ch, w, c)
		collectEnvoy(ch, w, c)
		collectTraefik(ch, w, c)
		collectNginx(ch, w, c)
	}
}

// counts are a workload's requests so far, answered and failed, all
// taking latency seconds.
type counts struct {
	ok, failed, latency float64
}

// histogram is n observations of v (in the unit of bounds) as a constant
// histogram.
func histogram(d *prometheus.Desc, bounds []float64, v, n float64, labels ...string) prometheus.Metric {
	count := uint64(n)
	return prometheus.MustNewConstHistogram(d, count, float64(count)*v, buckets(bounds, v, n), labels...)
}

func collectIstio(ch chan<- prometheus.Metric, w Workload, c counts) {
	ch <- prometheus.MustNewConstMetric(istioRequests, prometheus.CounterValue, c.ok, "destination", w.Namespace, w.Name, "200")
	ch <- prometheus.MustNewConstMetric(istioRequests, prometheus.CounterValue, c.failed, "destination", w.Namespace, w.Name, "500")
	ch <- histogram(istioDuration, istioBuckets, c.latency*1000, c.ok+c.failed, "destination", w.Namespace, w.Name)
	pod := w.Name + podSuffix
	ch <- histogram(httpDuration, httpBuckets, c.latency, c.ok, w.Namespace, pod, "200")
	ch <- histogram(httpDuration, httpBuckets, c.latency, c.failed, w.Namespace, pod, "500")
}

func collectLinkerd(ch chan<- prometheus.Metric, w Workload, c counts) {
	ch <- prometheus.MustNewConstMetric(linkerdResponses, prometheus.CounterValue, c.ok, w.Namespace, w.Name, "inbound", "success", "200")
	ch <- prometheus.MustNewConstMetric(linkerdResponses, prometheus.CounterValue, c.failed, w.Namespace, w.Name, "inbound", "failure", "500")
	ch <- histogram(linkerdLatency, linkerdBuckets, c.latency*1000, c.ok+c.failed, w.Namespace, w.Name, "inbound")
}

// collectEnvoy sends the canary service's cluster stats as contour's Envoy
// names them, then as kuma's does.
func collectEnvoy(ch chan<- prometheus.Metric, w Workload, c counts) {
	canary := w.Name + "-canary"
	for _, l := range [][2]string{
		{w.Namespace + "_" + canary + "_" + servicePort, ""},
		{canary + "_" + w.Namespace + "_svc_" + servicePort, canary + "_" + w.Namespace + "_svc_" + servicePort},
	} {
		ch <- prometheus.MustNewConstMetric(envoyRequests, prometheus.CounterValue, c.ok, l[0], l[1], "200")
		ch <- prometheus.MustNewConstMetric(envoyRequests, prometheus.CounterValue, c.failed, l[0], l[1], "500")
		ch <- histogram(envoyTime, envoyBuckets, c.latency*1000, c.ok+c.failed, l[0], l[1])
	}
}

func collectTraefik(ch chan<- prometheus.Metric, w Workload, c counts) {
	svc := w.Namespace + "-" + w.Name + "-canary-" + servicePort + "@kubernetescrd"
	for code, n := range map[int]float64{200: c.ok, 500: c.failed} {
		ch <- prometheus.MustNewConstMetric(traefikRequests, prometheus.CounterValue, n, svc, strconv.Itoa(code), "GET", "http")
		ch <- histogram(traefikDuration, traefikBuckets, c.latency, n, svc, strconv.Itoa(code), "GET", "http")
	}
}

// collectNginx counts the requests of the canary Ingress Flagger makes of
// the one named like the workload.
func collectNginx(ch chan<- prometheus.Metric, w Workload, c counts) {
	canary := w.Name + "-canary"
	upstream := w.Namespace + "-" + canary + "-" + servicePort
	for code, n := range map[int]float64{200: c.ok, 500: c.failed} {
		l := []string{w.Namespace, w.Name, canary, upstream, strconv.Itoa(code)}
		ch <- prometheus.MustNewConstMetric(nginxRequests, prometheus.CounterValue, n, l...)
		ch <- histogram(nginxResponseDuration, nginxBuckets, c.latency, n, l...)
		ch <- histogram(nginxRequestDuration, nginxBuckets, c.latency, n, l...)
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
