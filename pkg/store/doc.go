// Package store is flotilla's embedded store: an event journal, the
// consumers' cursors into it and JSON state documents (rollouts and the
// like; a document may decode and encode itself, [Codec], to skip decoding
// bytes it has seen).
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
// Every event the journal keeps reads back: Append refuses, with a
// permanent error (see package fault), an event whose encoding does not
// decode to it again (a time outside years 0000-9999 in UTC, data that is
// not the JSON its content type says). A record that is intact on disk but
// not a readable event (kept by an older version) comes back from
// [Store.Read] with [Record.Err] set, for the reader to set aside.
//
// Open streams the segments. A write torn by a crash at the tail of the
// last segment is zeroed, with a warning, when no intact record follows it.
// Damage that intact records follow, or a journal that ends below a
// consumer's cursor, is no crash: Open refuses to start rather than drop
// acknowledged events or hand their sequence numbers out again, and names
// [Repair] ('flotilla store repair'), which keeps every intact record and
// puts a tombstone event ([TypeJournalDamaged]) under the number of each
// damaged or missing one.
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
