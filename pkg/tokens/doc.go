// Package tokens keeps the API tokens created at run time (`flotilla token
// create`), and the revocations of the config's tokens (#31 item 4,
// docs/design/identity.md "Tokens that can be revoked"): each a document
// of the state port (the embedded store, or the NATS KV of scale-out mode)
// holding the SHA-256 of its secret, never the secret, its name, its
// grants (a role in a project), who created it, its expiry and when it was
// revoked. Every replica answers from a cache of those documents: the
// store's own writes in embedded mode (one process), a watch of the KV in
// scale-out mode, so a revocation reaches every replica within the
// watch's latency.
package tokens
