// Package ui is flotilla's web UI, served at /ui/ from assets embedded in
// the binary: plain HTML, one stylesheet and one script, nothing loaded
// from elsewhere. The pages read the HTTP API (pkg/api) and stay live on
// its Server-Sent Events (GET /api/v1/watch).
package ui
