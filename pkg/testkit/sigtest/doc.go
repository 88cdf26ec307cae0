// Package sigtest signs images the way cosign does, for tests that need a
// signature cosign cannot be made to produce (a tampered bundle, a
// signature copied onto another image, a throw-away CA's keyless
// certificate) or many signatures fast (the bench): the old
// "sha256-<hex>.sig" simple-signing signatures, Sigstore bundles attached as
// OCI referrers (cosign v3), with keys it generates, and a throw-away
// Fulcio-like CA with its trusted_root.json for keyless signatures. What it
// writes is what pkg/signature reads. Everything else signs with the real
// cosign (pkg/testkit/cosigntest).
package sigtest
