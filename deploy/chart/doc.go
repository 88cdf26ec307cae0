// Package chart holds flotilla's Helm chart (flotilla/) and its checks:
// renderings with the default values and with every option on, as `helm
// template` does (pkg/render, the Helm SDK), `helm lint --strict` (the SDK's
// pkg/lint), and a server-side apply of each rendering to a real API server
// of the local fleet, with the ServiceMonitor, PrometheusRule and HTTPRoute CRDs installed.
package chart
