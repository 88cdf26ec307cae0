// Package advance keeps the wave accounting of a rollout: it records each
// cluster's result and, when a wave is done, starts the next wave or ends the
// rollout. A failure beyond the wave's budget (zero for now) fails the rollout
// at once.
//
// Consumes: dev.flotilla.cluster.succeeded.v1, dev.flotilla.cluster.failed.v1
// Emits:    dev.flotilla.wave.succeeded.v1, dev.flotilla.wave.started.v1,
//
//	dev.flotilla.rollout.succeeded.v1, dev.flotilla.rollout.failed.v1
package advance
