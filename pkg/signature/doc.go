// Package signature verifies that an image digest is signed before it rolls
// out: cosign public keys, or keyless identities (OIDC issuer + subject
// pattern of a Fulcio-style certificate) under a trusted root read from a
// file (applications[].verify.signatures).
//
// The signatures are found in the registry the way cosign attaches them:
// the "sha256-<hex>.sig" tag (simple-signing payloads, cosign before v3 and
// `--new-bundle-format=false`) and Sigstore bundles attached as OCI
// referrers (cosign v3, with go-containerregistry's fallback to the
// referrers tag). Every signature is verified by sigstore-go's verifier;
// the old format is wrapped into an in-memory bundle first, and its payload
// must name the digest (a signature copied from another image does not
// count), a bundle's statement must be cosign's signature predicate (an
// SBOM or provenance attestation does not count).
//
// A trusted signature is verified once per application and digest (the
// result is cached, bounded); a refusal is not cached, so a digest signed
// after its push is verified anew when the signature's push arrives
// (functions/verify). A signature that does not verify is a permanent error
// (fault.Permanent) naming why; a registry that cannot be read is a
// retryable one.
//
// A key's signature must carry an entry of a Rekor log its key's trusted
// root names (the signed entry timestamp of the .sig tag's Rekor bundle
// annotation, or a bundle's entries with their inclusion proofs), as
// `cosign verify --key` demands; one without is refused (ErrNoTlogEntry)
// unless the policy ignores the log (IgnoreTlog, cosign's
// --insecure-ignore-tlog, weaker); who signed then says the log was not
// checked ("key release" + TlogNotChecked), and the rollout records it.
//
// A policy may also require attestations (Policy.Attestations): for each
// predicate type, a bundle among the referrers (cosign v3's `cosign
// attest`) or a DSSE envelope in the "sha256-<hex>.att" tag (cosign's old
// format, --new-bundle-format=false: read as cosign's verify-attestation
// reads it, the certificate and Rekor bundle in the layer's annotations)
// whose in-toto statement has it and names the digest, signed as a
// signature must be; the signature alone is then refused, naming the
// missing types. What the .att tag holds is never a signature, whatever
// its statement's predicate; the tag is read only under a policy that
// requires attestations.
//
// A keyless signature whose certificate verifies (its chain to the root,
// its log entry) but names an identity no policy trusts is refused naming
// the certificate's subject and OIDC issuer, and the identities trusted.
//
// A root without transparency logs (a private CA, the tests' own) is
// checked at the current time: keyless certificates must still be valid.
// A root with Rekor logs demands a log entry and checks the certificate at
// its time, as cosign does.
package signature
