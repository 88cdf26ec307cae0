// Package cdevents turns flotilla's events into CDEvents (spec v0.5, with
// github.com/cdevents/sdk-go), for CDEvents consumers: a verified image is
// an artifact.published; a cluster done with a rollout a service.deployed
// (the application's first version there) or service.upgraded, a cluster
// put back a service.rolledback, each in the environment of its cluster; a
// pipeline run asked for, taken up by its executor and ended a
// pipelinerun.queued, pipelinerun.started and pipelinerun.finished; an
// audit record (a control allowed or refused, a token created or revoked)
// a custom event dev.cdeventsx.flotilla-audit.recorded.0.1.0 whose
// subject's content is the record. Every event of a rollout carries the rollout's id
// as its chain id. The events validate against the spec's schemas before
// they leave (the SDK checks them).
//
// Translate is a pure function of the event and the rollout it names, read
// through a port (Rollouts), so a mirror that restarts anywhere in the
// journal translates the same way.
package cdevents
