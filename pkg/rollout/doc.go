// Package rollout is the domain of a rollout: one image digest carried through
// the waves of a fleet for one application, the state of every cluster in it,
// and the pure rules that move it on (wave accounting, what to revert). It
// imports no adapter: pkg/state is the port that keeps rollouts, and
// pkg/state/embedded its adapter on the embedded store.
package rollout
