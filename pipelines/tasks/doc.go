// Package tasks holds the step logic of flotilla's pipeline tasks. The same
// functions run in the embedded executor and, through `flotilla task ...`,
// as the steps of Tekton Tasks.
//
// Each task is a Def in one registry (Defs, Lookup): its params, which are
// both the flags of `flotilla task <name>` and the params of its Tekton
// Task, its results, written to --result-<name> files (Tekton's
// $(results.<name>.path)), and its Run function. Def.Parse reads a step's
// command line with the command's own flags, which is how the embedded
// executor runs a Tekton step without Tekton.
//
//   - apply-canary (ApplyCanary): applies a Flagger Canary and the objects it
//     refers to in the target cluster and sets the workload's image.
//   - bump-image (BumpImage): writes the image into a deployments git
//     repository with pkg/gitops, commits and pushes.
//   - apply-manifests (ApplyManifests): renders a git application's commit
//     and applies it with Flux's server-side apply manager, recording it in
//     the cluster's inventory (inventory.go: ConfigMap
//     flotilla-inventory-<application>) and pruning what the commit no
//     longer renders as --prune says (once the cluster succeeded, or at
//     once for a revert).
//
// A failed task writes its error to the error result; `flotilla task` exits
// ExitPermanent when retrying cannot help.
package tasks
