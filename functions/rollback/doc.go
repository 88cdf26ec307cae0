// Package rollback reverts a failed rollout: every cluster that took the new
// digest gets its previous image back, newest wave first, with Flagger's
// analysis skipped; a wave is reverted once the newer one is. Like launch it
// waits for nothing: it requests a revert run per cluster, with a deadline,
// and hears back from the executors (pipelinerun.finished), from observe
// (cluster.reverted, cluster.applied for a cluster whose apply ended after
// the rollout failed) and from the cluster's deadline, when it reads the
// cluster itself.
//
// A revert that fails (its run failed, or the cluster was not back on its
// previous image by the deadline) leaves the cluster RevertFailed; when
// nothing else is left to revert the rollout ends RollbackFailed, naming
// those clusters, instead of RolledBack. A user's retry
// (rollout.retry.requested, `flotilla retry`) reverts them again and
// replays the events functions gave up on.
//
// Consumes: dev.flotilla.rollout.failed.v1, dev.flotilla.cluster.reverted.v1,
//
//	dev.flotilla.cluster.applied.v1, dev.flotilla.pipelinerun.finished.v1 (revert),
//	dev.flotilla.cluster.deadline.v1 (revert), dev.flotilla.rollout.retry.requested.v1
//
// Emits:    dev.flotilla.pipelinerun.requested.v1, dev.flotilla.cluster.deadline.v1,
//
//	dev.flotilla.cluster.reverted.v1, dev.flotilla.rollout.rolledback.v1,
//	dev.flotilla.rollout.rollbackfailed.v1, the events a retry replays
package rollback
