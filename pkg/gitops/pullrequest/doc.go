// Package pullrequest opens, reads, merges and closes pull requests (merge
// requests on GitLab) on the git hosts a deployments repository lives on,
// through each host's kept Go client: Host is the one small interface, with
// one file per host (github.go, gitlab.go, gitea.go; Forgejo speaks Gitea's
// API) and New as the explicit factory.
//
// flotilla pushes the branch itself (gitops.Propose); a Host only manages
// the pull request on top of it. Open is idempotent: it finds the pull
// request of the head branch, in any state, before creating one.
//
// Errors are classified the flotilla way (pkg/fault): the host refusing the
// credentials (401, 403) or not knowing the repository (404) is permanent;
// a conflict, an unprocessable request (422: the branch is not there yet),
// a rate limit, a 5xx and network errors are retried.
package pullrequest
