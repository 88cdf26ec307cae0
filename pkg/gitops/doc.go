// Package gitops bumps an application's image in a deployments git
// repository instead of patching the cluster live: clone, edit, commit, push.
//
// Edits are pure functions on a file's bytes, one implementation per file
// kind:
//
//   - Kustomize sets the images: entry of a kustomization.yaml (newName,
//     newTag, digest), adding the entry when it is missing.
//   - HelmValues sets a Helm values file's image.repository / image.tag, or
//     the paths a KubeCD trigger names with repoValue / tagValue, under a
//     sub-chart prefix such as "api." when asked, honouring KubeCD's optional
//     image.prefix (a registry prefix prepended to the repository).
//   - Manifest sets the image of every matching container and init
//     container in plain Kubernetes YAML, multi-document files included.
//
// An edit finds the nodes to change with the yaml.v3 Node API and splices the
// new scalar into the original bytes at the node's line and column, so
// comments, blank lines, key order, quoting and indentation stay exactly as
// they were; the document is never re-encoded. Every edit re-parses its output
// and checks that it now says what was asked before returning it.
//
// Bump clones one branch shallowly into memory (go-git, memory storage and
// memfs), applies the edits, commits when something changed and pushes. When
// the push loses a race with another writer it fetches the new head, resets
// onto it, applies the edits again and retries, with bounded, jittered
// backoff, so concurrent bumps of the same repository keep each other's
// commits. Nothing changed means no commit: retrying a bump is harmless.
//
// Errors wrap sentinel errors (ErrFileNotFound, ErrPathNotFound, ...) that
// callers test with errors.Is, and are classified the flotilla way: bad
// input, a missing file or path, invalid YAML, a refused credential or an
// unknown repository or branch are permanent (IsPermanent, which agrees with
// fault.IsPermanent); network errors and a push still rejected after every
// attempt (ErrConflict) are worth retrying.
package gitops
