Feature: Webhooks sent by the real senders
  The git pushes and registry notifications that start these rollouts are
  the ones the senders themselves send, configured as an operator would:
  the local Gitea's push webhook (a repository webhook of type gitea, JSON,
  with the gitea receiver's secret) after a commit pushed to it with git,
  and Debian's docker-registry's notifications (its
  notifications.endpoints, with the registry receiver's token) after an
  image pushed to it. The test builds no payload: a receiver that reads
  only the shape of the test's hand-built payloads fails here. The
  hand-built payloads remain for the senders that cannot run here
  (GitHub, GitLab, Bitbucket, the cloud registries), with their fixtures.

  # Catches: a gitea receiver that refuses or misreads what Gitea really
  # sends (its signature headers, clone_url, the first push of a branch
  # with before 0000..., its commit lists), a git source that cannot fetch
  # over HTTP from a forge, and a rollout that gives wave 2 the commit
  # before wave 1 promoted it (watched in the clusters, not read from
  # flotilla).
  Scenario: A commit pushed to the local Gitea rolls out through two waves
    Given a deployments repository on the local Gitea with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And Gitea sends the repository's pushes to flotilla
    And the repository's first commit has been rolled out to every cluster
    And the application's workloads are watched in every cluster
    When a push changes "greeting" to "hej" in "charts/podinfo/values.yaml"
    Then Gitea delivered the push of that commit to flotilla itself
    And the clusters took that commit in wave order: "c1" promoted it before "c2" was given it
    And the primary and the workload in every cluster run that commit, greeting "hej"

  # Catches the same with executor tekton: the PipelineRuns' steps fetch
  # and render the commit from the forge's HTTP URL (no credentials, the
  # optional flotilla-git Secret absent), not from a local path.
  Scenario: A commit pushed to the local Gitea rolls out through two waves of Tekton pipelines
    Given a deployments repository on the local Gitea with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And Gitea sends the repository's pushes to flotilla
    And the repository's first commit has been rolled out to every cluster
    And the application's workloads are watched in every cluster
    When a push changes "greeting" to "hej" in "charts/podinfo/values.yaml"
    Then Gitea delivered the push of that commit to flotilla itself
    And the clusters took that commit in wave order: "c1" promoted it before "c2" was given it
    And the primary and the workload in every cluster run that commit, greeting "hej"

  # Catches a distribution receiver that refuses or misreads what the
  # registry really sends with executor tekton (registries.feature runs the
  # embedded executor with a login registry): the v1 envelope's media type,
  # an anonymous push (no actor), the blob pushes and flotilla's own pulls
  # of the same batch, and the tag's digest.
  Scenario: A version pushed to Debian's docker-registry rolls out by Tekton pipelines from the registry's own notification
    Given Debian's docker-registry, which notifies flotilla itself
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed to that registry
    Then the registry itself notified flotilla of "1.1.0" by its digest
    And the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And that namespace holds a succeeded PipelineRun of the rollout of "1.1.0" for every cluster, its pods labelled alike
