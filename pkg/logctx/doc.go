// Package logctx carries log attributes in a context: the dispatcher puts
// the rollout id (and the event and function) of the event it hands a
// function into the call's context with [With], and every line logged with
// that context through a logger whose handler is wrapped by [Handler] carries
// them, however deep the call and whoever built the logger. Components log
// with the ...Context methods of slog (InfoContext, WarnContext); code with
// no logger of its own takes one from the context with [From].
package logctx
