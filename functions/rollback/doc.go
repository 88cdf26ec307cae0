// Package rollback reverts a failed rollout: every cluster that took the new
// digest gets its previous image back, newest wave first, with Flagger's
// analysis skipped; a wave is reverted once the newer one is.
//
// Consumes: dev.flotilla.rollout.failed.v1, dev.flotilla.cluster.reverted.v1
// Emits:    dev.flotilla.rollout.rolledback.v1
package rollback
