// Package proposer is pull-request mode's consumer of
// dev.flotilla.pullrequest.requested.v1, beside the hosts it talks to
// (pkg/gitops/pullrequest): for a wave of a GitOps application in mode
// pullRequest it pushes the wave's branch (every change of the wave in one
// commit on the base, pkg/gitops), opens the pull request or finds it,
// asks the host to merge it where auto-merge is on (retried with back-off
// within gitops.pullRequest.mergeRetryFor), polls it, verifies that the
// base holds what was merged, and closes what no longer waits. It answers
// with dev.flotilla.pullrequest.status.v1, which launch records. It runs
// in a dispatch lane of its own: a host may take seconds to answer.
package proposer
