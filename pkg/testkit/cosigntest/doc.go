// Package cosigntest signs with the real cosign CLI (built by
// deploy/tools/local/build.sh from the Go module proxy into the fleet's
// cache): `cosign generate-key-pair`, `cosign sign --key` in the Sigstore
// bundle format attached as an OCI referrer (v3's default) and in the
// attached .sig format (--new-bundle-format=false), and `cosign attest`
// in either format (the old one a DSSE envelope in the .att tag);
// and keyless, `cosign sign --fulcio-url --rekor-url --identity-token`, an
// ephemeral key certified by a Fulcio stand-in (pkg/testkit/fulciotest)
// for the identity of an OIDC ID token (pkg/testkit/oidcop's IDToken).
//
// Signatures go to a Rekor stand-in (pkg/testkit/rekortest) when the
// signer has one, or to no transparency log. What cosign cannot be made to
// produce, a tampered bundle, the tests build from a bundle cosign wrote
// (SignToFile) and attach with pkg/testkit/sigtest.
package cosigntest
