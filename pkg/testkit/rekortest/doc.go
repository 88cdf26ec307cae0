// Package rekortest is a Rekor stand-in for tests: an HTTP server speaking
// Rekor v1's API for adding an entry (POST /api/v1/log/entries), as the
// real cosign CLI and sigstore-go's signer call it, backed by sigstore-go's
// testing VirtualSigstore (pkg/testing/ca), which holds the log's key.
//
// Each proposed entry (hashedrekord, dsse) is validated and canonicalized
// by Rekor's own types, as the real server does, and answered with a log
// entry carrying a signed entry timestamp and an inclusion proof in a
// signed checkpoint. Trees are not kept: each entry is the only leaf of its
// tree, which verifiers cannot tell apart from a larger log.
//
// TrustedRootJSON is the trusted_root.json naming the log (what flotilla's
// policies and `cosign verify --trusted-root` read); SigningConfigJSON the
// signing config pointing cosign at it (`cosign sign --signing-config`).
package rekortest
