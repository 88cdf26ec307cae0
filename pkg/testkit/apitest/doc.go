// Package apitest serves flotilla's HTTP API for tests: over a real journal
// and state (pkg/store, pkg/state/embedded) in a temporary directory, with
// a running watch hub, so the watch stream, timelines and the CLI's
// --watch are tested against the code that serves them.
package apitest
