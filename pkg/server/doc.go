// Package server wires flotilla's main job: the embedded store, the webhook
// intake, the dispatcher of its functions and the HTTP API, in one process. Main-style:
// New builds it, Run serves until the context ends, Close releases the store.
// Tests boot it whole on 127.0.0.1:0.
package server
