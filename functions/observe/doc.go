// Package observe decides what became of each cluster of a rollout. Events
// are hints: before a cluster counts as succeeded, failed or reverted,
// observe reads the canary and its workloads from the cluster and checks
// which image the primary and the canary run, so a late or stale event
// cannot move a rollout on.
//
// It reads four kinds of hint: Flagger's canary events; the executors'
// pipelinerun.finished answers to launch's requests (the cluster took the
// digest, or the run failed); a cluster's deadline (its step's time is up:
// the cluster is read and counts as succeeded, failed, or, while Flagger
// still makes progress, gets a few more deadlines); and function.failed
// (a function gave up on an event of the rollout: the rollout records it
// for `flotilla retry`, and a pipeline request given up on counts as a run
// that failed).
//
// A burst of one rollout's canary events and apply runs' ends (a wave of
// 1,000 clusters sends thousands) is handled in one update of the rollout
// when the dispatcher hands them over together (HandleFolded, a
// dispatch.Folder), with the same outcome as one at a time.
//
// Consumes: dev.flotilla.canary.v1, dev.flotilla.pipelinerun.finished.v1 (apply),
//
//	dev.flotilla.cluster.deadline.v1 (apply), dev.flotilla.function.failed.v1
//
// Emits:    dev.flotilla.cluster.succeeded.v1, dev.flotilla.cluster.failed.v1,
//
//	dev.flotilla.cluster.reverted.v1, dev.flotilla.cluster.applied.v1,
//	dev.flotilla.cluster.deadline.v1 (an extension), dev.flotilla.pipelinerun.finished.v1
//	(for a request given up on)
package observe
