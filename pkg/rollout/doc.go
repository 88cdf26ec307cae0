// Package rollout is the domain of a rollout: one image digest carried through
// the waves of a fleet for one application, the state of every cluster in it,
// and the pure rules that move it on (wave accounting, what to revert). The
// Repo keeps rollouts and per-application state in the embedded store.
package rollout
