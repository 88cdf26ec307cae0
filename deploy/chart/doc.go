// Package chart holds flotilla's Helm chart (flotilla/) and its checks:
// renderings with the default values and with every option on, as `helm
// template` does (pkg/render, the Helm SDK). helm lint and a server-side
// apply of each rendering to a real API server come next (issue #14).
package chart
