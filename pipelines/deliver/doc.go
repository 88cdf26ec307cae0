// Package deliver renders an application's delivery policy for one cluster
// and has an executor apply it: the rollout's image with Flagger's analysis,
// or a cluster's previous image without it (a revert). It is the one place
// launch's and rollback's pipeline requests become pipeline runs.
//
// [Runner] is the engine's consumer of dev.flotilla.pipelinerun.requested.v1:
// it runs in a dispatch lane of its own (a run may take many minutes; it
// never holds the workers that move rollouts on), retries a failing run
// until the request's deadline, and answers every request with
// dev.flotilla.pipelinerun.finished.v1. It consumes
// dev.flotilla.prune.requested.v1 too, which advance emits when it records
// the success of a cluster of a git application that prunes: a run that
// deletes what the commit no longer renders from that cluster
// (Deliverer.Prune), retried until the request's deadline, emitting
// nothing. (Not cluster.succeeded itself: advance consumes it in the
// default lane, and the consumers of one type share one lane.)
package deliver
