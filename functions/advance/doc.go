// Package advance keeps the wave accounting of a rollout: it records each
// cluster's result and, when a wave is done (within its failure budget, then
// baked), starts the next wave or ends the rollout; a failure beyond the
// budget fails the rollout at once. Starting the next wave starts what of it
// may start (Rollout.Start) in the same transaction. It also takes the
// controls: pause, resume, abort, freeze window overrides, approvals, and
// the fleet's stop and start, and takes clusters removed from the fleet
// out of the rollouts in flight (their waves go on with those that remain).
// A burst of one rollout's cluster results is recorded in one update of it
// when the dispatcher hands them over together (HandleFolded, a
// dispatch.Folder), with the same outcome as one at a time.
//
// Consumes: dev.flotilla.cluster.succeeded.v1, dev.flotilla.cluster.failed.v1,
//
//	dev.flotilla.wave.baked.v1, dev.flotilla.rollout.pause.requested.v1,
//	dev.flotilla.rollout.resume.requested.v1, dev.flotilla.rollout.abort.requested.v1,
//	dev.flotilla.fleet.stop.requested.v1, dev.flotilla.fleet.start.requested.v1,
//	dev.flotilla.wave.approval.requested.v1, dev.flotilla.rollout.override.requested.v1,
//	dev.flotilla.fleet.clusters.removed.v1
//
// Emits:    dev.flotilla.wave.succeeded.v1, dev.flotilla.wave.started.v1,
//
//	dev.flotilla.pipelinerun.requested.v1, dev.flotilla.cluster.deadline.v1,
//	dev.flotilla.wave.continued.v1, dev.flotilla.wave.baked.v1 (a timer),
//	dev.flotilla.rollout.succeeded.v1, dev.flotilla.rollout.failed.v1,
//	dev.flotilla.prune.requested.v1 (a git application's cluster that
//	succeeded: the executors delete what the commit no longer renders there)
package advance
