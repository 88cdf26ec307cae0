// Package image assembles flotilla's container image without Docker: one
// layer holding the static flotilla binary, CA certificates and a non-root
// user, on an empty base (scratch), per platform, in one OCI index labelled
// with the OCI annotations. deploy/tools/image builds the binaries, calls
// Build and pushes the result (`make image`).
package image
