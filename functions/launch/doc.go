// Package launch starts what of a wave waits to start (Rollout.Start, the
// rule in pkg/rollout): for each cluster it may start it asks an executor
// for a pipeline run that applies the rollout's digest, and sets the
// cluster's deadline, in one transaction with the cluster's move to
// Applying. plan and advance start a wave's first clusters themselves when
// they start the wave; launch starts the rest: as a wave's parallelism
// frees room, at a freeze window's end, after an approval, a resume or the
// line's start, when the wave's pull request merged, and on a user's retry.
// It waits for nothing: the executors answer with pipelinerun.finished
// (see package deliver), which observe consumes, and deadlines arrive as
// timer events.
//
// Consumes: dev.flotilla.wave.continued.v1, dev.flotilla.rollout.retry.requested.v1,
//
//	dev.flotilla.pullrequest.status.v1, dev.flotilla.rollout.failed.v1
//
// Emits:    dev.flotilla.pipelinerun.requested.v1 (one per cluster),
//
//	dev.flotilla.cluster.deadline.v1 (a timer, due at the step's deadline),
//	dev.flotilla.wave.continued.v1 (a timer: a freeze window's end, a pull
//	request's merge deadline), dev.flotilla.pullrequest.requested.v1 (open,
//	merge on a retry, close), dev.flotilla.rollout.abort.requested.v1 (a
//	pull request closed, unverified or past its deadline)
package launch
