// Package plan matches a verified image to the applications that track its
// repository and starts a rollout for each application whose version policy
// accepts the new tag; otherwise it records why not.
//
// Consumes: dev.flotilla.image.verified.v1
// Emits:    dev.flotilla.rollout.started.v1, dev.flotilla.wave.started.v1,
//
//	dev.flotilla.rollout.skipped.v1
package plan
