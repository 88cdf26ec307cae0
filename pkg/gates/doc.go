// Package gates answers Flagger's gate webhooks for Kanary's validations:
//
//   - manual: a canary is promoted only once someone approves it
//     (`flotilla approve <rollout>`), and rolled back when someone rejects
//     it; after the validation period, StatusAfterDeadline decides (valid,
//     invalid, or none: keep waiting);
//   - label watch: the canary is rolled back as soon as an invalidation label
//     appears on its Deployment or on one of its pods, and promoted only
//     after it ran the whole validation period without one.
//
// (Kanary's third mode, PromQL, is a Flagger metric check, rendered by
// pkg/canary.)
//
// Flagger asks through two hooks flotilla renders into the canary:
// confirm-promotion (a 2xx promotes) and rollback (a 2xx rolls back). The
// [Keeper] is the intake's GateKeeper (the intake reads Flagger's call into
// the domain's [Call] and answers with the [Decision]; the domain imports no
// edge). The intake calls it for every gate call and answers Flagger with its
// decision. Approvals and the time a
// canary revision was first seen at a gate are kept in the store, so a
// restart neither forgets an approval nor restarts a validation period.
package gates
