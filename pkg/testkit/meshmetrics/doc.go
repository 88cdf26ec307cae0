// Package meshmetrics serves, for Prometheus to scrape, the request
// metrics a service mesh or ingress exports for the workloads a test names,
// at the request rate, success rate and latency the test sets: the series
// Flagger's built-in request-success-rate and request-duration queries read
// for every provider flotilla renders canaries for:
//
//   - istio: istio_requests_total, istio_request_duration_milliseconds;
//   - kubernetes and gatewayapi: http_request_duration_seconds, per pod;
//   - linkerd: response_total, response_latency_ms (inbound, per
//     deployment);
//   - contour: envoy_cluster_upstream_rq and envoy_cluster_upstream_rq_time
//     of the canary service's cluster (envoy_cluster_name
//     "<namespace>_<name>-canary_9898");
//   - kuma: the same Envoy series labelled service
//     "<name>-canary_<namespace>_svc_9898";
//   - traefik: traefik_service_requests_total and
//     traefik_service_request_duration_seconds of service
//     "<namespace>-<name>-canary-9898@kubernetescrd";
//   - nginx: nginx_ingress_controller_requests and the response and
//     request duration histograms of the canary Ingress's upstream, for the
//     Ingress named like the workload.
//
// The service (and nginx's Ingress) are taken to be named like the workload
// and to listen on 9898, as in the features. With the fleet's Prometheus
// scraping it (localfleet.Fleet.AddScrapeTarget), Flagger's analysis runs
// real PromQL over real samples, and the test decides whether a canary is
// healthy. TestFlaggerQueries runs the queries of Flagger's own source
// against a real Prometheus scraping the exporter.
package meshmetrics
