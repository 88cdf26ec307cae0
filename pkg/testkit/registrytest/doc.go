// Package registrytest runs a real OCI registry for tests: Debian's
// docker-registry (CNCF distribution 2.8, `make deps` installs it) on a free
// loopback port, with its storage under the test's directory, optionally
// requiring users (htpasswd, bcrypt) and sending its own push
// notifications to an endpoint, as a registry in front of a fleet does.
package registrytest
