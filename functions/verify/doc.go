// Package verify re-resolves a pushed tag to its digest at the registry, so a
// rollout carries a digest flotilla has seen itself, and refuses repositories
// that no application tracks. For applications that verify signatures
// (pkg/signature) it checks them, and says who signed the digest or why it
// is refused.
//
// What cosign attaches to a digest (tags sha256-<hex>.sig, .att, .sbom, and
// the referrers tag sha256-<hex>) is never a version. A signature pushed
// after its image (cosign signs by digest, so CI pushes first) makes verify
// find the tag pointing at the digest and verify that version again.
//
// Consumes: dev.flotilla.image.pushed.v1
// Emits:    dev.flotilla.image.verified.v1, dev.flotilla.image.rejected.v1
package verify
