// Package events is flotilla's event catalogue: the CloudEvents types flotilla
// records and emits, their payloads, and one adapter per webhook sender
// (registries, git hosts, Flagger, Tekton) that turns a delivery into events.
//
// The intake ([Intake], mounted at /hooks/) serves POST /hooks/<receiver> and
// POST /hooks/<receiver>/<token>. For each delivery it authenticates with the
// receiver's [Sender], parses the delivery into events, appends them to the
// [Journal] and only then answers 202, so an acknowledged delivery is never
// lost. Event ids are deterministic (receiver, sender and the sender's
// delivery id, or a hash of the body), so a redelivery is a duplicate the
// journal drops.
//
// Senders, one file each (see [SenderTypes]):
//   - distribution: CNCF distribution registry notifications -> [TypeImagePushed]
//   - github: GitHub push webhooks -> [TypeGitPushed]
//   - flagger: Flagger event webhooks -> [TypeCanary]
//
// Status codes: 202 accepted or ignored, 400 malformed, 401 unauthenticated,
// 404 unknown receiver, 405 not POST, 413 too large, 415 unsupported
// Content-Type, 503 journal unavailable (retry). Every error body is
// {"error": "..."}.
package events
