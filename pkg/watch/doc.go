// Package watch shows the journal live: a Hub fans the events of rollouts,
// and each rollout they changed, out to watchers (the API's Server-Sent
// Events, which the web UI and `--watch` read), and Timeline reads a
// rollout's events back from the journal.
//
// The hub reads the journal from its end, in batches, off the functions'
// path, and only while someone watches; it lets a burst of appends gather
// for DefaultInterval before it reads them, so that it wakes once per
// burst, after the functions reacting to it; a watcher that does not keep up is
// dropped (it reconnects and reads the state again), so watchers never slow
// the engine.
package watch
