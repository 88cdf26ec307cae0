// Package state is the port of flotilla's rollout state: rollouts (read,
// create, update under optimistic concurrency with the events that
// announce the change, list those in flight, page through the finished)
// and what flotilla knows of each application.
//
// Two adapters implement [Rollouts]:
//
//   - embedded (default): pkg/state/embedded.Repo on pkg/store's documents, one
//     bbolt transaction per update, its events through the store's
//     transactional outbox;
//   - scale-out (a later issue): Kubernetes custom resources in a
//     management cluster, an update a read-modify-write under the
//     object's resourceVersion, retried on a conflict, its events in the
//     object's status until the bus has them (the same outbox).
//
// Functions never see an adapter: each declares the few methods it needs.
// Package statetest is the contract both adapters pass.
package state
