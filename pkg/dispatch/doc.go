// Package dispatch routes journaled events to flotilla's functions.
//
// A reader follows the event journal from a durable cursor and puts every
// event on the queue of its key (see [Key]: its rollout, else the image or
// git repository pushed, else the event itself). A bounded pool of workers
// runs the queues: the events of one key in journal order, one at a time;
// different keys in parallel, so one slow or unreachable cluster, or one
// long pipeline, never holds up another rollout. Every call has a deadline;
// a failed call is retried after a backoff that waits off the workers (the
// key's later events wait behind it, no other key does); a function that
// gives up leaves a function.failed event. At most MaxInFlight events are
// read and not yet handled.
//
// A function that can fold (a [Folder]) is handed the events queued on a
// key for it alone in one call, up to [MaxFold]: observe then writes a
// burst of a rollout's events in one update instead of one each, and
// advance a burst of its cluster results. A function that takes only some
// events of a type it consumes says which (a [Selective]: rollback wants
// only reverts' run ends), so the others are a Folder's alone.
//
// The cursor is a watermark below every event still in flight, saved in
// the background: delivery is at least once, and a crash replays what was
// in flight or handled after the watermark, which functions handle
// idempotently (their output events' ids are derived from their input, so
// the journal drops repeats). A failing journal stalls dispatch visibly
// (Err) and is retried; it never ends the process.
//
// The context of every call carries the event's rollout id, id and type
// and the function's name (pkg/logctx), and the dispatcher's logger
// (logctx.From): every line logged with it, by the function or anything it
// calls, carries them.
//
// In scale-out mode, Shards run one dispatcher per partition of the bus the
// replica holds, each on that partition's view (its events, cursor and
// timers), started and stopped as the replica gains and loses partitions.
//
// A Mirror follows the same journal with its own cursor and posts every
// event to an outbound CloudEvents sink.
package dispatch
