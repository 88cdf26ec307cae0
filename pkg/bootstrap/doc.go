// Package bootstrap puts what flotilla needs into the clusters of a fleet
// (`flotilla fleet bootstrap`) and reports what is missing or outdated
// (`flotilla fleet check`): Flagger (its CRDs, RBAC and controller, as
// Flagger v1.41.0's own kustomize overlay builds them, the mesh provider
// chosen by the applications that target the cluster), optionally Flagger's
// load tester, flotilla's least-privilege identity, and, in the cluster that
// runs Tekton, flotilla's Pipeline and Tasks with the Role that runs them.
//
// flotilla's identity in a cluster is the ServiceAccount flotilla (in
// flotilla-system) with a token Secret; ReaderRole is bound cluster-wide
// (reading what flotilla renders: the start-up prune looks for removed
// applications' objects everywhere), DeliverRole only in the namespaces of
// the applications that target the cluster (writing what flotilla renders).
// Neither grants Secrets, Namespaces or RBAC. Kubeconfig renders a
// kubeconfig carrying that token, for flotilla's config.
//
// Code map:
//
//   - plan.go: Options, Target and Plan (config → per-cluster objects);
//   - flagger.go: Flagger's embedded manifests (manifests/) built with
//     kustomize;
//   - identity.go: the ServiceAccount, roles and bindings (their rules are
//     exported: the README's permissions table is checked against them);
//   - apply.go, cluster.go: server-side apply with field manager
//     FieldManager (created / configured / unchanged: the object before
//     and after, status aside; replaced), dry runs, Check, and Kubeconfig;
//   - foreign.go: a Flagger bootstrap did not install (Helm's, Flux's, ...),
//     which bootstrap leaves alone and Check judges by its version.
//
// A Flagger bootstrap did not install is a Deployment, in any namespace,
// running an image whose repository ends in /flagger, whose managedFields
// name no FieldManager (bootstrap's own rule: labels and names can be
// copied, server-side apply's record of who applied cannot be by accident).
// Where one runs, bootstrap applies none of Flagger's own objects
// (Target.FlaggerObjects, WithoutFlagger) and needs Flagger's CRDs to be
// there (LeaveAlone); Check never compares it with bootstrap's Flagger,
// whose settings another installer need not share, and judges its version
// against FlaggerVersion instead (JudgeForeign): older is Outdated, the
// same, newer or unreadable is OK. Taking it over (--manage-flagger,
// Target.TakeOver) applies bootstrap's Flagger anyway; where the other's
// Deployment stands where bootstrap's goes and the server refuses to change
// it in place (an immutable selector, another manager's rollingUpdate beside
// bootstrap's Recreate), bootstrap deletes it, waits until it is gone
// (ReplaceWait) and creates its own: Replaced, or WouldReplace in a dry run.
// It never replaces an object it applied before.
package bootstrap
