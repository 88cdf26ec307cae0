// Package verify re-resolves a pushed tag to its digest at the registry, so a
// rollout carries a digest flotilla has seen itself, and refuses repositories
// that no application tracks.
//
// Consumes: dev.flotilla.image.pushed.v1
// Emits:    dev.flotilla.image.verified.v1, dev.flotilla.image.rejected.v1
package verify
