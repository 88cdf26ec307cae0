// Package tracing exports each rollout as one OpenTelemetry trace, over
// OTLP/HTTP (otlptracehttp), built from the event journal after the fact.
//
// A [Tracer] follows the journal from its end at start (a tail: no cursor of
// its own) and hands every event to a [Builder], which keeps the start of
// each span still open and emits a span, with the events' own times, when
// the event that ends it arrives:
//
//	rollout <app> <tag>        push (or first event) -> succeeded | rolled back | rollback failed | superseded
//	├── push <image>:<tag>     image.pushed | git.pushed -> image.verified | git.verified
//	├── wave <n>               wave.started -> wave.succeeded (or the rollout's failure)
//	│   └── cluster <name>     first apply requested -> cluster.succeeded | cluster.failed
//	│       └── apply <name>   pipelinerun.requested -> pipelinerun.finished
//	└── rollback               rollout.failed -> rolled back | rollback failed
//	    └── revert <name>      revert requested -> cluster.reverted (or the rollback's end)
//	        └── revert run     pipelinerun.requested -> pipelinerun.finished
//
// Ids are derived, not stored: the trace id from the rollout id, each span
// id from the rollout id and the event that started the span. A span's
// parent is named by its derived id whether or not the parent has ended (it
// is exported last), so the spans link however they are exported, and
// anything else that knows a rollout id (a function, a restarted or second
// flotilla) can add spans to its trace. The sampler decides by trace id
// (TraceIDRatioBased), so a rollout's spans are all kept or all dropped.
//
// Memory is bounded: a rollout's open spans are forgotten when it ends, at
// most MaxRollouts are followed, and pushes are remembered (to become the
// push span of the rollouts they start) among the last MaxPushes only.
//
// Why a tail and no durable cursor: traces are a view for people, not a
// record (the journal is one, and `flotilla describe` reads it); the OTLP
// exporter drops spans anyway when its collector is down for long; and a
// cursor would hold the journal's retention back for a collector that is
// gone. What a restart costs is the spans that were open across it: their
// starts were in memory. A rollout in flight then still ends its trace (its
// root marked flotilla.trace.partial, started at the first event seen).
package tracing
