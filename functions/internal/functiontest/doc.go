// Package functiontest is the functions' shared test kit: a store-backed
// rollout repository, a summary of emitted events for comparisons, and a
// fake executor that records what the functions ask to apply (the features
// run the real executors against real clusters).
package functiontest
