// Package kubecd reads KubeCD's deployment files as KubeCD writes them:
// environments.yaml (environments with their cluster, namespace, default
// values and release files; the clusters and Helm repositories they name)
// and the release files (releases with a chart directory or a chart
// reference pinned by version, a values file, key/value values, upgrade
// triggers and resource files).
//
// Load decodes them strictly: every field is either honoured or refused
// with an error naming it (Load's doc lists which). Paths are resolved
// against the file that names them and must stay inside the repository.
// Release resolves one release of one environment into what a cluster
// renders: the chart, its values in KubeCD's order and the resource files.
// Nothing here reaches a cluster or a network; pkg/config turns the files
// into flotilla's configuration and pkg/render renders a release.
package kubecd
