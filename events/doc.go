// Package events is flotilla's event catalogue: the CloudEvents types flotilla
// records and emits, their payloads, and one adapter per webhook sender
// (registries, git hosts, Flagger, Tekton) that turns a delivery into events.
package events
