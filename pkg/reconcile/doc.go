// Package reconcile holds what the clusters run against what the fleet
// validated. For each application (in scale-out mode, each whose pushes
// fall in a partition this replica holds), every fleet.reconcile.interval
// and when a cluster's watch cache sees a primary change or go, the
// Reconciler reads what each cluster of its waves runs (pkg/cluster's
// Observe) and has the domain judge it (rollout.Reconcile) against the
// application's validated digest (AppState.DeployedDigest):
//
//   - a cluster that entered the waves (new in the config, or its labels
//     now match) or came back empty (no canary or primary) is caught up:
//     it journals a reconcile request, which plan turns into a rollout of
//     kind catch-up limited to those clusters, with the waves' pipeline
//     and analysis, without a push;
//   - a cluster the digest was rolled out to whose primary runs something
//     else drifted: it journals drift.detected (once per cluster, primary
//     and digest), counts it (flotilla_drift_clusters), records it in the
//     application's state (AppState.Drift, read by the API), and with
//     driftPolicy revert requests a rollout of kind drift-revert to the
//     drifted clusters. A rollout of the digest that succeeds on a
//     drifted cluster ends its drift in the state at once (advance,
//     rollout.DriftStatus.Reached), not at the next check.
//
// A git application is checked against its validated commit (the commit
// its fleet last converged on, AppState.DeployedDigest too): a cluster
// that came empty (no canary or no primary; no workload is needed, the
// commit's render creates it) is caught up with that commit, its request
// naming the repository and commit ("repository#commit", keyed with the
// repository's pushes). A cluster whose primary runs is held against the
// image the commit renders for the workload's container in that cluster
// (the Renderer port, pkg/app over pkg/gitops's copies of the
// repositories: rendered once per commit and cluster, again when another
// commit is validated): another image is drift, reported as an image
// application's, and with driftPolicy revert the commit is applied again
// to the drifted clusters (a new revision Flagger analyses: the
// rollout's restart token on the pod template). A cluster the commit
// could not be rendered for is not compared; the next check renders
// again, unless the error is permanent (the commit renders no such
// workload there), kept as the commit's render for that cluster.
//
// A release set (docs/design/release-sets.md) is checked as one git
// application against its validated commit: each member with a canary is
// read and rendered in every cluster of the set's waves, and a cluster is
// judged by its first member not current there (rollout.SetObserved): a
// member empty catches the whole set up there, a member's primary running
// another image is the set's drift, named by member, handled by the set's
// driftPolicy. A member is never checked on its own; a change of its
// primary checks its set. A set whose version is a tuple (its deployed
// AppState.DeployedVersions) holds each image member against its entry
// (rollout.MemberExpected: its image at its digest, never the tuple's
// hash); a set of git and image members its git members against what
// their entry's commit renders, so one check reads both kinds and a
// catch-up or a revert carries the deployed tuple (rollout.PlanReconcile).
//
// Nothing is decided while a rollout of the application is in flight: it
// reaches every cluster of its waves itself. A request's id derives from
// the application, kind, digest and clusters (and, for a revert, the
// primaries found: image and generation), so a check repeated, or made
// again after a restart, starts no second rollout; one that failed is not
// started again by itself (`flotilla retry` it); a primary changed by
// hand again is a new drift.
package reconcile
