// Package fleetrollout projects flotilla's rollouts to FleetRollout custom
// resources (flotilla.dev/v1alpha1) in a namespace of the management
// cluster, so that `kubectl get fleetrollouts -w` follows the fleet:
// application, version, phase, wave and clusters in the printer columns,
// what the rollout waits for with -o wide. A follower of the bus: it reads
// each rollout an event names and server-side applies its object and its
// status subresource. flotilla writes them; editing one changes nothing.
package fleetrollout
