// Package sigtest signs images the way cosign does, for tests: the old
// "sha256-<hex>.sig" simple-signing signatures, Sigstore bundles attached as
// OCI referrers (cosign v3), with keys it generates, and a throw-away
// Fulcio-like CA with its trusted_root.json for keyless signatures. What it
// writes is what pkg/signature reads.
package sigtest
