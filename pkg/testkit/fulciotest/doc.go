// Package fulciotest is a Fulcio stand-in for tests: an HTTP server
// answering Fulcio's v2 API for a signing certificate (POST
// /api/v2/signingCert, JSON), as sigstore-go's Fulcio client calls it for
// the real cosign CLI (`cosign sign --fulcio-url ... --identity-token ...`,
// or a signing config naming the server).
//
// As the real Fulcio, it verifies the request's OIDC ID token (the
// Authorization bearer) against its issuer's discovery document and keys
// (go-oidc), for the audience "sigstore" by default; checks the proof of
// possession (the token's e-mail, which must be verified, signed by the
// key to certify, as Fulcio's e-mail issuers want it); and issues a
// code-signing certificate for 10 minutes naming the e-mail as its SAN and
// the issuer in Fulcio's extensions (1.3.6.1.4.1.57264.1.1 and .8). A token
// of an issuer it was not told to trust, for another audience, expired or
// without a verified e-mail, or a proof signed by another key, is refused
// (401 or 400, Fulcio's error body).
//
// The certificates chain to a CA made with sigstore-go's testing package
// (pkg/testing/ca, the generators of its VirtualSigstore); CA is that
// authority as a trusted_root.json lists it (rekortest.Log.TrustedRootJSON
// takes it). No SCT is embedded: the trusted roots of the tests name no
// certificate-transparency log, and neither cosign's signing nor
// flotilla's verification then asks for one.
package fulciotest
