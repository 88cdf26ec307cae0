// Package fleetmetrics exports delivery metrics for Prometheus: rollouts in
// flight by phase, how long rollouts and waves take, cluster results,
// rollbacks, the reaction latencies the benchmark measures (push -> first
// wave applied, wave N done -> wave N+1 applied, first failure -> reverts
// applied), and what DORA's four keys are computed from (lead time from
// push to fleet, time to restore).
//
// An Observer tails the journal (pkg/bus) from its end at start-up, in
// batches, off the functions' path: it never slows the engine, and what it
// counts is per process (Prometheus counters). Durations come from the
// events' times, following each event back to the event that caused it
// (events.Derive ids extend their cause's id): a cluster's success to the
// Flagger event that reported it, a rollout to the push that started it.
// It keeps the timing of rollouts in flight only, and a bounded window of
// recent causes, so its memory does not grow with history.
//
// The rollouts-by-phase gauge is read from the rollout state (a port,
// Rollouts) at scrape time, so it is right after a restart.
package fleetmetrics
