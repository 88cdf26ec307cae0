// Package ui is flotilla's web UI, served at /ui/ from assets embedded in
// the binary: plain HTML, one stylesheet and one script, nothing loaded
// from elsewhere. The pages read the HTTP API (pkg/api) and stay live on
// its Server-Sent Events (GET /api/v1/watch). Its pages need a login with
// an API token (login.go: the session cookie pkg/api's Authn checks); the
// assets and the login page are open.
package ui
