// Package api is flotilla's HTTP API under /api/v1: the rollouts (in flight
// first, then finished ones, paged), and the controls users send: manual
// approvals and retries, each recorded, with who asked. Calls that change
// something need the server's API token (server.apiToken) as a bearer token.
package api
