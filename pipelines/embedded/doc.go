// Package embedded is flotilla's default executor: it runs the
// flotilla-rollout Pipeline (parsed with Tekton's v1 types) in process, as
// Tekton's controller would (a DAG from runAfter and result references,
// params and results substituted, when expressions, a timeout and retries
// per task, a timeout per run), and runs each step by parsing its
// `flotilla task` command line with the command's own flags and calling the
// same Go function Tekton's pod would (pipelines/tasks). See package
// pipelines for the Pipeline itself.
package embedded
