// Package bus is the port of flotilla's event bus: what the dispatcher, the
// intake and the timers need of it, whatever carries it.
//
// Two adapters implement [Bus]:
//
//   - embedded (default): pkg/store, an append-only segment log on local
//     disk with its cursors and timers in bbolt, for one flotilla process;
//   - scale-out (a later issue): NATS JetStream, the stream's sequence as
//     Seq, its message-id de-duplication window for ids, durable
//     consumers' positions (or a KV bucket) for cursors, and scheduled
//     messages (or a KV bucket of due times) for timers, shared by several
//     active flotilla replicas.
//
// Package bustest is the contract both must pass: order, de-duplication,
// durability of cursors and timers, wake-ups. The dispatcher and the intake
// depend on this package only, never on an adapter.
//
// Every follower of the bus (the dispatcher's reader, the sink mirror, the
// watch hub, the delivery metrics, the tracer) follows it one way,
// [Follower]: read in order, wait for the next append, and on a failure
// stall with one back-off (DefaultBackoff doubling up to MaxBackoff),
// reported, until the bus answers again.
package bus
