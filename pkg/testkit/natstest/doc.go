// Package natstest runs a real NATS JetStream cluster for tests: the
// nats-server binary deploy/tools/local/build.sh builds from the Go module
// proxy, as n nodes on free loopback ports (client, route and monitoring
// ports), each with its file store under the test's directory. Tests kill
// a node (SIGKILL) and start it again on its store, to check what a
// scale-out flotilla keeps when a NATS node is lost.
package natstest
