// Package embedded is the embedded adapter of the rollout state port
// (pkg/state): rollouts and per-application state as JSON documents of
// pkg/store, one bbolt transaction per update, the events of an update
// through the store's transactional outbox. Rollouts in flight are the hot
// set; finished ones move to an archive ordered by creation time, so that
// what the engine reads does not grow with history. The hot set is also
// kept decoded in memory (the Repo is its documents' only writer): a read
// of a rollout in flight is a copy, not a JSON decode. Reads of the store
// (during another's commit) and updates do not decode a document either
// when its bytes are the ones last read or written (decoded.go, through
// store.Codec): an update of a 1,000-cluster rollout only encodes it.
package embedded
