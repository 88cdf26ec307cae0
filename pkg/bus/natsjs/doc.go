// Package natsjs is the scale-out adapter of pkg/bus: the bus on NATS
// JetStream, shared by several flotilla replicas.
//
//   - Events: one stream (default FLOTILLA, subjects flotilla.events.<p>,
//     one per partition: a hash of the event's key, fixed count),
//     replicated (default R3), each event in the CloudEvents NATS binding's
//     structured mode, its id the Nats-Msg-Id, so the stream's
//     de-duplication window (default 24h) drops a redelivery. Append
//     returns once JetStream acknowledged the events (stored on a quorum);
//     several events go in one atomic batch (nats-server 2.12's atomic
//     publish, through Synadia's orbit.go jetstreamext): all or none.
//   - Reads: JetStream's direct batch get, answered by any replica; a
//     read from a replica behind an append the process knows of waits for
//     it to catch up, or fails to be retried: no wake-up is lost.
//   - Wake-ups: an ordered consumer of the new messages' headers closes
//     Changed at every append, by any replica.
//   - Cursors: a KV bucket (<Stream>_cursors), one key per consumer.
//   - Timers: a KV bucket of due times (<Stream>_timers) indexed in memory
//     from a watch; timers.go says why not scheduled messages.
//   - Views: a partition's events, cursors and timers, for the replica
//     that holds it (Bus.Partition).
//   - Partitions: the engine's work shared among live replicas without a
//     leader, one replica per partition at a time, under leases in a KV
//     bucket (<Stream>_leases); partitions.go says how handover stays
//     exclusive.
//
// The CloudEvents SDK's JetStream binding (protocol/nats_jetstream/v2)
// sends and receives events but exposes neither the stream's sequence,
// reads by sequence, atomic batches nor the duplicate flag of an ack,
// which the port needs; nats.go's jetstream package does, and this adapter
// writes the binding's structured format so that other consumers of the
// stream read plain CloudEvents.
//
// The adapter passes pkg/bus/bustest against a real three-node JetStream
// cluster (pkg/testkit/natstest).
package natsjs
