// Package api is flotilla's HTTP API under /api/v1: the rollouts (in flight
// first, then finished ones, paged), and the controls users send: manual
// approvals and retries, each recorded, with who asked. Every call needs an
// identity, which Authn (authn.go) finds in front of the routes: an API
// token (server.apiTokens) as a bearer token, or the web UI's session
// cookie; server.anonymousRead opens the reads (#31). Every control is
// audited (audit.go): a dev.flotilla.audit.recorded.v1 record of who, from
// where, what and why, journaled with the control's event; GET
// /api/v1/audit reads the records back from the journal, newest first.
package api
