// Package canary renders an application's delivery policy into a Flagger
// Canary, with Flagger's own Go API types, for one cluster of one rollout.
package canary
