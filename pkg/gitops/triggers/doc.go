// Package triggers acts on KubeCD's image upgrade triggers, as KubeCD's
// design document's step 5 has a build do: a verified push of a new tag
// of an image a release's trigger tracks is written into the release's
// values in the release file of the deployments repository, by a commit
// on the branch flotilla follows, and that commit rolls out through the
// waves as any push of the repository does.
//
// For each image.verified of an image some trigger tracks (as the files
// flotilla started with name it), the Upgrader checks out the branch's
// head, resolves every trigger of the releases tracking it there
// (pkg/kubecd: the repository at repoValue after repoPrefixValue, the
// current tag at tagValue, per environment), and asks the trigger's track
// (KubeCD's tracks are flotilla's, pkg/versionpolicy) whether the pushed
// tag replaces the current one. The accepted ones are written with
// gitops.KubeCDValue (the values entry of tagValue, appended when
// missing; comments and layout kept) and committed in one commit, rebased
// and pushed again when the branch moved (where the entry's value is
// asked again). The commit becomes a git.pushed of the repository, which
// verify confirms against the repository and plan rolls out like a git
// host's webhook. A tag a track refuses becomes rollout.skipped, saying
// why, for the release's application.
//
// Consumes: dev.flotilla.image.verified.v1
// Emits:    dev.flotilla.git.pushed.v1, dev.flotilla.rollout.skipped.v1
package triggers
