// Package events is flotilla's event catalogue: the CloudEvents types
// flotilla records and emits, their payloads, the extensions every event of
// a rollout carries (rolloutid, and flotilladue on a timer), and
// New/Derive/Decode. It depends on the CloudEvents SDK only; the HTTP intake
// and the webhook senders that turn deliveries into these events are in
// package events/intake.
package events
