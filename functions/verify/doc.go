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
// A git push (WithGit) is confirmed against the repository, fetched with
// go-git: the commit must be on the pushed branch (or be what the pushed
// tag names). The applications following the repository and branch whose
// tracked paths the push changed are named in git.verified (a push of a
// tag matching an application's pattern always counts); the others are
// skipped, saying what the push changed.
//
// WithApplications, verify records every push of an application in its
// state (what it saw, from which source, when; why it rejected or
// skipped it; why it is not verified yet), and a poll's push of a version
// no webhook announced reports the application's webhook silent
// (application.webhook.missed) until a webhook's push of it arrives.
//
// Consumes: dev.flotilla.image.pushed.v1, dev.flotilla.git.pushed.v1
// Emits:    dev.flotilla.image.verified.v1, dev.flotilla.image.rejected.v1,
// dev.flotilla.git.verified.v1, dev.flotilla.git.rejected.v1,
// dev.flotilla.rollout.skipped.v1, dev.flotilla.application.webhook.missed.v1
package verify
