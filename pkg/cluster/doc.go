// Package cluster gives access to the clusters of a fleet: a client
// configuration per cluster from the config's kubeconfigs, and reads of a
// canary's live status (Flagger phase, weight, the images its primary and
// canary workloads, Deployments or DaemonSets, run), a cluster's health
// (its API server reached, Flagger ready: health.go), and what an
// application runs for catch-up and drift, with its primaries' changes as
// the watch caches see them (observe.go).
package cluster
