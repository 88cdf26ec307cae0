// Package runtime is flotilla's small in-process function runtime: it reads the
// event journal from a durable cursor, hands every event to the functions that
// consume its type, journals what they return, and only then moves the cursor,
// which a background saver writes after each batch (off the path from one
// function to the next). Delivery is at least once: after a crash the runtime
// resumes from the saved cursor and functions see some events again, which they handle idempotently (their
// output events have ids derived from their input, so the journal drops
// repeats). A Mirror follows the same journal with its own cursor and posts
// every event to an outbound CloudEvents sink.
package runtime
