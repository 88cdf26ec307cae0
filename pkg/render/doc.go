// Package render turns a checked-out deployments repository into the
// objects one cluster applies, the way a git application's source says:
// plain manifests (YAML files, or the .yaml/.yml/.json files of a
// directory, in name order), a kustomization (kustomize's krusty, built in:
// no plugins, no helm inflation, files outside a kustomization's root
// refused) or a Helm chart (Helm's loader and template engine, client-only:
// no cluster lookups; values merged as KubeCD's releases do).
//
// Errors are permanent (fault.Permanent): a commit that does not render
// never will.
package render
