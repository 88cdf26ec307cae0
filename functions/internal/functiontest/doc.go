// Package functiontest is the functions' shared test kit: a store-backed
// rollout repository, and a summary of emitted events for comparisons.
package functiontest
