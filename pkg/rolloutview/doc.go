// Package rolloutview draws a rollout for a terminal: waves x clusters, one
// row per cluster, with each cluster's state, Flagger's phase and the
// canary's weight. `flotilla describe rollout`, both `--watch`es and the
// demo draw with it.
package rolloutview
