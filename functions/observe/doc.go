// Package observe turns Flagger's canary events into cluster results of the
// rollout they belong to. An event is only a hint: before a cluster counts as
// succeeded, failed or reverted, observe reads the canary and its workloads
// from the cluster and checks which image the primary and the canary run, so a
// late or stale event cannot move a rollout on.
//
// Consumes: dev.flotilla.canary.v1
// Emits:    dev.flotilla.cluster.succeeded.v1, dev.flotilla.cluster.failed.v1,
//
//	dev.flotilla.cluster.reverted.v1
package observe
