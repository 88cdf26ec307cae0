// Package pipelines holds the Tekton Pipeline and Tasks flotilla runs for a
// rollout (embedded into the binary), the launcher that runs them on Tekton or
// in process, and the step logic their tasks execute.
package pipelines
