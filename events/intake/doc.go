// Package intake is flotilla's webhook intake and its senders: one adapter
// per webhook sender (registries, git hosts, Flagger, Tekton, CloudEvents)
// that authenticates a delivery and turns it into catalogue events
// (package events).
//
// The intake ([Intake], mounted at /hooks/) serves POST /hooks/<receiver> and
// POST /hooks/<receiver>/<token>. For each delivery it authenticates with the
// receiver's [Sender], parses the delivery into events, appends them to the
// [Journal] and only then answers 202, so an acknowledged delivery is never
// lost. Event ids are deterministic (receiver, sender and the sender's
// delivery id, or a hash of the body), so a redelivery is a duplicate the
// journal drops.
//
// The intake also serves POST /events for the first receiver of type
// cloudevents, with the CloudEvents webhook OPTIONS handshake, and answers
// Flagger's gate calls (?gate=<type>) with its [GateKeeper]'s decision.
//
// Senders, one file each (see [SenderTypes]; README has a table):
//   - registries -> [events.TypeImagePushed]: dockerhub, harbor, distribution,
//     github (package / registry_package events: ghcr.go), quay, acr, gar
//     (Pub/Sub push with OIDC), ecr, artifactory, nexus;
//   - git hosts -> [events.TypeGitPushed]: github, gitlab, gitea / forgejo,
//     bitbucket, bitbucket-server;
//   - flagger: event webhooks -> [events.TypeCanary]; gate calls -> [GateCall];
//   - tekton: Tekton's CloudEvents -> [events.TypePipelineRun];
//   - cloudevents: native CloudEvents (binary, structured, batch).
//
// Status codes: 202 accepted or ignored, 200/403 a gate call's answer, 400
// malformed, 401 unauthenticated, 404 unknown receiver, 405 not POST, 413 too
// large, 415 unsupported Content-Type, 429 rate limited (Retry-After), 500 a
// sender's bug, 503 journal unavailable (retry). Every error body is
// {"error": "..."}.
package intake
