// Package pipelines holds the Tekton Pipeline and Tasks flotilla runs for a
// rollout (embedded into the binary), what the two executors share, and (in
// package tasks) the step logic their tasks execute. The executors are in
// packages of their own: pipelines/embedded (in process, the default) and
// pipelines/tektonrun (Tekton PipelineRuns).
//
// The Pipeline flotilla-rollout takes one cluster of a rollout to the new
// image: Task flotilla-bump-image writes the image into the application's
// deployments repository when it is GitOps-managed (a when expression on
// the gitops param), then Task flotilla-apply-canary applies the Flagger
// Canary and the objects it refers to and sets the workload's image. Each
// step runs `flotilla task <name> --<param>=...` in flotilla's image;
// results go to $(results.<name>.path) files. The target cluster's
// kubeconfig comes from a Secret mounted into the step, never inline.
//
// Code map:
//
//   - tekton/*.yaml: the Tasks and the Pipeline; resources.go embeds,
//     pins the image of, and parses them with Tekton's v1 types (Load,
//     Manifests, Objects). `flotilla pipelines print|install` show and
//     apply them.
//   - executor.go: the executors' shape (Run: the whole pipeline, GitOps
//     bump included; pipelines/deliver, their consumer, declares it as its
//     Executor) and ApplyCanary (apply-canary alone); params.go: RunParams
//     and Results, how they map to the Pipeline's params and results, and
//     the labels runs carry.
//   - embedded/: the default executor. It runs the parsed Pipeline in
//     process, as Tekton's controller would (DAG from runAfter and result
//     references, params and results substituted, when, a timeout and
//     retries per task, a timeout per run), and runs each step by parsing
//     its `flotilla task` command line with the command's own flags and
//     calling the same Go function (tasks.Lookup): Tekton and the embedded
//     executor run the same code.
//   - tektonrun/: the Tekton executor. It creates a PipelineRun of
//     flotilla-rollout (Tekton's v1 types and clientset) in the cluster that
//     runs Tekton, keeps each target cluster's kubeconfig Secret there
//     (ApplyKubeconfigSecret), labels the run flotilla.dev/rollout, follows
//     it by watching, ends the wait early when Observe sees its completion in
//     Tekton's CloudEvents (events.PipelineRun), and reads its results from
//     status.results. A failed run is permanent when its step exited
//     tasks.ExitPermanent or Tekton refused the run itself; its message
//     carries the step's error result.
//
// A run is named after its rollout, cluster and image, so calling Run again
// (a redelivered event) follows the run already under way, or returns the
// results of the one that succeeded, instead of starting another.
package pipelines
