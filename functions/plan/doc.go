// Package plan matches a verified image (or git commit) to the applications
// that track it and starts a rollout for each application whose version
// policy accepts it (superseding or queueing behind the one in flight);
// otherwise it records why not. Starting a rollout starts what of its first
// wave may start (Rollout.Start) in the same transaction: the clusters'
// runs are requested here, not a journal hop later. A rollout that ends
// starts the one queued behind it; a quarantine or a user's rollback
// request ends or reverts what runs the version. A catch-up's or a
// drift's revert's request (pkg/reconcile) starts a rollout of the
// validated digest limited to its clusters, of kind catch-up or
// drift-revert, unless a rollout of the application is in flight.
//
// It records each verified push in the application's state (what it saw,
// from a webhook or a poll; why it skipped it) in the update it makes with
// its decision, and reports the application's webhook silent when a
// poll's push brings a version no webhook announced.
//
// Consumes: dev.flotilla.image.verified.v1, dev.flotilla.git.verified.v1,
//
//	dev.flotilla.rollout.succeeded.v1, dev.flotilla.rollout.rolledback.v1,
//	dev.flotilla.rollout.superseded.v1, dev.flotilla.version.quarantine.requested.v1,
//	dev.flotilla.rollout.rollback.requested.v1, dev.flotilla.reconcile.requested.v1
//
// Emits:    dev.flotilla.rollout.started.v1, dev.flotilla.wave.started.v1,
//
//	dev.flotilla.pipelinerun.requested.v1, dev.flotilla.cluster.deadline.v1,
//	dev.flotilla.rollout.skipped.v1, dev.flotilla.rollout.queued.v1,
//	dev.flotilla.rollout.superseded.v1, dev.flotilla.pullrequest.requested.v1,
//	dev.flotilla.application.webhook.missed.v1
package plan
