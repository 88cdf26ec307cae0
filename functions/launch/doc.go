// Package launch starts a wave: for every cluster of the wave it asks an
// executor for a pipeline run that applies the rollout's digest, and sets
// the cluster's deadline, in one transaction with the cluster's move to
// Applying. It waits for nothing: the executors answer with
// pipelinerun.finished (see package deliver), which observe consumes, and
// the deadline arrives as a timer event.
//
// Consumes: dev.flotilla.wave.started.v1
// Emits:    dev.flotilla.pipelinerun.requested.v1 (one per cluster),
//
//	dev.flotilla.cluster.deadline.v1 (a timer, due at the step's deadline)
package launch
