// Package rollout is the domain of a rollout: one image digest (or git
// commit) carried through the waves of a fleet for one application, the
// state of every cluster in it, and the rules that move it on, as pure
// functions over these values (no I/O, no context, no store). A rule
// changes the rollout it is given and returns the events of its
// transition, derived from their cause, so a redelivered cause derives the
// same events, which the journal drops.
//
// The rules, by file:
//
//   - plan.go: whether a verified version rolls out (DecideVersion), the
//     waves its rollout runs (Plan, Waves, LimitWaves), what it does about
//     the rollouts in flight (MakeWay, Supersede), its start (Started), a
//     quarantine and a rollback of the whole fleet (RollbackOf);
//   - start.go: which clusters start now, and what holds the others (the
//     stopped line, a pause, approvals, a freeze window, a pull request);
//   - advance.go: the wave state machine: a cluster's result (Record),
//     the wave's outcome and the next wave (Decide, Advance), bakes, and
//     the users' controls (Pause, Resume, Override, Abort, Approve);
//   - judge.go: what a canary event, the end of an apply run or a step's
//     deadline mean for a cluster (Classify, Judge, Applied, Expire);
//   - rollback.go: the revert order (wave by wave, newest first), what a
//     revert's run and deadline mean, the rollback's end and its retry;
//   - steps.go: a cluster's pipeline run and its deadline, pull requests.
//
// The functions (functions/...) decode an event, read the ports they
// declare, call a rule here and commit its change with its events in one
// transaction. The package imports no adapter: pkg/state is the port that
// keeps rollouts, and pkg/state/embedded its adapter on the embedded
// store.
package rollout
