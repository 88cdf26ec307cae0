// Package meshmetrics serves, for Prometheus to scrape, the request
// metrics a service mesh or ingress exports for the workloads a test names,
// at the request rate, success rate and latency the test sets: the series
// Flagger's built-in request-success-rate and request-duration queries read
// for Istio (istio_requests_total, istio_request_duration_milliseconds) and
// for the kubernetes and Gateway API providers
// (http_request_duration_seconds, per pod). With the fleet's Prometheus
// scraping it (localfleet.Fleet.AddScrapeTarget), Flagger's analysis runs
// real PromQL over real samples, and the test decides whether a canary is
// healthy.
package meshmetrics
