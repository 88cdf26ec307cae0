// Package simulate runs users' Gherkin scenarios against their own fleet
// config, offline and in virtual time: `flotilla simulate --config FILE
// FEATURE...` (issue #36).
//
// The engine is the real one, built by pkg/app as `flotilla serve` builds
// it (the same functions, dispatcher, wave rules and embedded state, in a
// temporary directory), with three ports replaced:
//
//   - the executor applies instantly into an in-memory fleet model (fleet.go);
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
// acts only while the engine is idle, one action at a time. A scenario
// therefore lands on the same virtual instants however loaded the machine.
//
// The step library is in steps.go (documented in docs/simulate.md); an
// unknown step fails naming it and the closest known steps. After each
// scenario a report (report.go) gives the rollout's timeline in virtual time
// and a waves x clusters table.
//
// Not simulated: catch-up and drift (reconcile), the registry poll and
// resync. An approval is held to the API's rule of who may approve
// (pkg/rollout's ApprovalRefused: automation, approvals.from, separation
// of duties; a person's groups as the scenario gives them, a token's as
// server.apiTokens does) and journaled as the API journals an accepted
// one.
package simulate
