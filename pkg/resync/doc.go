// Package resync recovers lost events. Flagger does not retry its event
// webhooks, so an event sent while flotilla was down, or dropped on the way, is
// gone. The Resyncer reads, at start and then periodically, the live canary
// status of every cluster of an in-flight rollout that has been quiet for a
// while, and journals what it finds as a canary event, exactly as if Flagger
// had sent it; observe then decides, with the same checks as for Flagger's own
// events. A dropped webhook delays a rollout; it never strands it.
package resync
