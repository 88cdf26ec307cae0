// Package store is flotilla's embedded store: one bbolt file that holds the
// event journal, the consumers' cursors into it and JSON state documents
// (rollouts and the like).
//
// The journal is append-only. [Store.Append] returns only after the events are
// committed and fsync'd, so the intake may answer 202 as soon as it returns.
// Events are de-duplicated by CloudEvents id and numbered with an increasing
// sequence; concurrent appends share commits (group commit), which is what lets
// the intake reach thousands of durable events per second on a small machine.
// [Store.Changed] lets a reader wait for new records without polling.
//
// Layout of the file, one bbolt bucket each:
//
//	events     big-endian seq -> event as CloudEvents structured JSON
//	event_ids  event id       -> big-endian seq (de-duplication)
//	cursors    consumer name  -> big-endian seq
//	docs       one nested bucket per collection: key -> JSON document
//
// Only one process may open a store at a time; a second one gets an error
// saying the store is in use.
package store
