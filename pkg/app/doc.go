// Package app is flotilla's composition root: it wires the main job (the
// embedded store as bus and state, the webhook intake, the dispatcher of
// the functions and the executors' runner, timers, resync, the sink mirror,
// the tracer when tracing is on, and the HTTP API) in one process. New builds it, Run serves until the
// context ends, Close releases what New opened. app_test.go boots it whole
// on 127.0.0.1:0. Only this package and pkg/cli import functions/ and
// pipelines/.
package app
