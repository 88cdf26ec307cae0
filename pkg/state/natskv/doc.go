// Package natskv is the scale-out adapter of pkg/state: the rollout state
// in JetStream KV buckets, shared by several flotilla replicas.
//
// Every change is a read-modify-write under the key's revision, retried
// with the newer value on a conflict (two replicas never lose each
// other's changes). The transactional outbox is kept: an update's events
// are written into the rollout's value with the change, appended to the
// bus after (pkg/bus/natsjs, which drops an id it has), then cleared; an
// outbox a crash left is appended by the rollout's next update or by
// Relay. A finished rollout moves to the archive bucket (its copy and an
// index by id first, then its in-flight key: each step can be repeated).
// A rollout is one value: one of 1,000 applying clusters is about 250 KiB
// of JSON, under the server's default 1 MiB payload limit (buckets are
// stored S2-compressed; the limit is on the uncompressed value).
//
// Reads see every write acknowledged before them, whichever replica
// wrote it: a key is read from its bucket's stream leader (the buckets
// pkg/bus/natsjs opens ask the leader, not any replica as nats.go's
// direct gets do), and List drains a watch until the leader's last
// revision (readAll). The rollouts in flight, which plan lists for every
// push, are indexed by a watch of their keys (inflightindex.go): a list
// reads only the values changed since this replica last decoded them. The
// NATS user needs $JS.API.STREAM.MSG.GET.> as
// well as the KV API.
package natskv
