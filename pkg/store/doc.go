// Package store is flotilla's embedded store: an event journal, the
// consumers' cursors into it and JSON state documents (rollouts and the
// like).
//
// The journal is an append-only log of segment files in the directory
// [JournalDir] next to the state file (see log.go for the record format).
// [Store.Append] returns only after its events are written and fdatasync'd,
// so the intake may answer 202 as soon as it returns. Events are
// de-duplicated by CloudEvents id and numbered with a gapless, increasing
// sequence. One writer goroutine commits every waiting Append together
// (group commit) with one write and one fdatasync into space zero-filled
// ahead, so the sync flushes no file metadata; while appends contend it
// waits up to a commit delay for more of them. That is what lets the intake
// journal over ten thousand webhooks a second on a small machine.
// [Store.Changed] lets a reader wait for new records without polling.
//
// Cursors and documents live in one bbolt file, one bucket each:
//
//	cursors    consumer name  -> big-endian seq
//	docs       one nested bucket per collection: key -> JSON document
//	outbox     events of UpdateAndAppend between the commit of their
//	           document and the journal (a transactional outbox)
//
// Stores written by older versions kept the journal in the bbolt file too;
// Open moves it into the log, keeping every sequence number.
//
// Only one process may open a store at a time; a second one gets an error
// saying the store is in use.
package store
