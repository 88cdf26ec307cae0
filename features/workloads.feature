Feature: Every workload of a git release is progressive
  A git application's commit may render several Deployments and DaemonSets
  (a chart's API and its worker, say). Each gets a Flagger Canary of its
  own with the application's delivery policy, and every one is analysed:
  a cluster succeeds once all of the release's canaries promoted the
  commit, and one of them failing fails the cluster, so the whole release
  (every workload) goes back to the previous commit's render there and in
  every other cluster the commit reached, as a failed rollout does.

  # Catches: a release judged by one canary. Before #33 the worker was
  # server-side applied with no canary at all (no Canary podinfo-worker,
  # no analysis of it in Flagger's events, its new pods straight in
  # service); a worker canaried but its failure not counted (the cluster
  # succeeds on podinfo's promotion, the rollout of that commit succeeds
  # instead of being rolled back); a rollback that restores the
  # application's own workload only (podinfo-worker left at the failed
  # commit, greeting "broken", in c1 or c4).
  Scenario: A release with two Deployments: both canaried by Flagger; the second failing rolls back both, in every cluster touched
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c4"
    And the chart also renders the Deployment "podinfo-worker"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c4"
    And the repository's first commit has been rolled out to every cluster
    And the analysis gate fails for the canary "podinfo-worker" in cluster "c4"
    When a push changes "greeting" to "broken" in "charts/podinfo/values.yaml"
    Then the rollout of that commit is rolled back
    And in every cluster Flagger analysed the canaries "podinfo,podinfo-worker"
    And in cluster "c4" Flagger failed the canary "podinfo-worker" and not the canary "podinfo"
    And the primary and the workload of "podinfo,podinfo-worker" in every cluster run the first commit, greeting "hello"
    And flotilla's rollout of that commit says cluster "c4" failed because of the workload "podinfo-worker"

  # Catches: a cluster judged by the first of its canaries to promote. The
  # worker's gate answers after 3 s, so its canary promotes seconds after
  # podinfo's: an implementation that counts a cluster succeeded on one
  # canary's promotion (podinfo's, or any one's) records cluster.succeeded
  # before podinfo-worker's primary runs the commit.
  Scenario: A release with two Deployments succeeds in a cluster only once the later of its canaries promoted
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And the chart also renders the Deployment "podinfo-worker"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    And the analysis gate answers the canary "podinfo-worker" after 3 seconds
    And the application's workloads are watched in every cluster
    When a push changes "greeting" to "hej" in "charts/podinfo/values.yaml"
    Then the rollout of that commit succeeds
    And in every cluster Flagger analysed the canaries "podinfo,podinfo-worker"
    And the primary and the workload of "podinfo,podinfo-worker" in every cluster run that commit, greeting "hej"
    And in every cluster flotilla counted the cluster succeeded only after the primary of "podinfo-worker" ran that commit, at least 2 seconds after "podinfo"'s
    And flotilla's rollout of that commit shows in cluster "c2" the workloads "podinfo=Succeeded,podinfo-worker=Succeeded"
