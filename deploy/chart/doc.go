// Package chart holds flotilla's Helm chart (flotilla/) and its checks: the
// values it refuses (the defaults alone, whose config names files no value
// mounts; misspelt and mistyped keys, through values.schema.json), the
// renderings with the least values the defaults need and with every option
// on, as `helm template` does (pkg/render, the Helm SDK), `helm lint
// --strict` (the SDK's pkg/lint), and a server-side apply of each rendering
// to a real API server of the local fleet, with the ServiceMonitor,
// PrometheusRule and HTTPRoute CRDs installed.
package chart
