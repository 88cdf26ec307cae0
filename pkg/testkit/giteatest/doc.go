// Package giteatest runs a real Gitea server for tests: the binary
// deploy/tools/local/build.sh builds from the Go module proxy, in a
// temporary directory, on a free loopback port, with SQLite, an admin user
// and an API token. Tests create repositories, webhooks, branch protections
// and commit statuses through Gitea's own SDK (code.gitea.io/sdk/gitea),
// push over HTTP with go-git, and merge or close pull requests as a
// reviewer would.
package giteatest
