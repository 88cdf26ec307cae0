// Package simulate runs users' Gherkin scenarios against their own fleet
// config, offline and in virtual time: `flotilla simulate --config FILE
// FEATURE...` (issue #36).
//
// The engine is the real one, built by pkg/app as `flotilla serve` builds
// it (the same functions, dispatcher, wave rules and embedded state, in a
// temporary directory), with its ports to the world replaced:
//
//   - the executor applies instantly into an in-memory fleet model (fleet.go):
//     each application's workload in each cluster, an image or a git
//     application's commit;
//   - the registry resolves every tag (its digest derived from image and
//     tag) and the git repositories confirm every commit a scenario
//     pushes, changing every path the applications track;
//   - a simulated Flagger answers each apply as the scenario decides per
//     version, cluster or wave (succeed, fail, hang), after the analysis time
//     the canary's spec gives (interval x steps), by posting the same
//     webhooks real Flagger posts to the flagger receiver;
//   - a virtual clock (dispatch.ManualClock, app.Options.Clock): the
//     simulator moves it only once the engine is idle, straight to the next
//     timer (a deadline, a bake's end, a freeze window's end, a retry's
//     backoff, Flagger's next step), so a two-hour bake passes in
//     milliseconds.
//
// Idleness is exact, not guessed from quiet (engine.go's settle): the
// dispatcher counts its work in flight in every lane, the pipeline
// runner's too (dispatch.Dispatcher.WaitIdle), and the simulated Flagger
// acts only while the engine is idle and held, what is due at one instant
// as one burst journaled whole (a wave's verdicts, as the real ones come
// together). The dispatcher handles one event at a time, in journal order
// (app.Options.Sequential), folding a burst of a rollout's canary events
// into one update as `flotilla serve` does, in the journal's order.
// A scenario therefore journals the same events in the same order at the
// same virtual instants however loaded the machine: its report is the
// same every run.
//
// The step library is in steps.go (documented in docs/simulate.md); an
// unknown step fails naming it and the closest known steps. After each
// scenario a report (report.go) gives the rollout's timeline in virtual time
// and a waves x clusters table.
//
// Nothing reaches the world (config.go's offline): not simulated are
// catch-up and drift (reconcile), the polls (the fleet's and every
// application's own) and resync; the scale-out bus, the sinks, the traces'
// export, FleetRollouts and single sign-on are off. Refused, naming the
// application and the field: a push of one that delivers by pull request,
// or of an image KubeCD's image triggers track (both read and write the
// deployments repository, whose files simulate does not have).
// A release set of git members is played as one application (its lead's
// workload in the fleet model): a member's push is its set's, every
// member runs what the set runs, and the report lists the set's members.
// A release set of image members is played member by member (setrun.go):
// each member's workload its own, the set's run applying them in order,
// the set's deployed version what the scenario says the fleet runs
// (deploySets), and the report naming each member's version. So is a
// release set of git and image members: its git members at the run's
// commit (their revision), its image members at their entries, a Job
// member complete at once.
// Signature policies run with stand-ins of their key authorities
// (signatures.go): the versions are signed in a registry in process and
// the verify function decides as configured.
// An approval is held to the API's rule of who may approve
// (pkg/rollout's ApprovalRefused: automation, approvals.from, separation
// of duties; a person's groups as the scenario gives them, a token's as
// server.apiTokens does) and journaled as the API journals an accepted
// one.
package simulate
