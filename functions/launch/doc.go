// Package launch runs the rollout pipeline (apply-canary) in every cluster of
// a wave that has started, in parallel up to a bound, and records what each
// cluster ran before.
//
// Consumes: dev.flotilla.wave.started.v1
// Emits:    dev.flotilla.cluster.applied.v1, dev.flotilla.cluster.succeeded.v1
//
//	(the cluster already runs the digest), dev.flotilla.cluster.failed.v1
//	(the pipeline failed permanently)
package launch
