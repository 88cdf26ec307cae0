Feature: Git pushes roll out a deployments repository's commits (KubeCD)
  A git application follows a deployments repository: each cluster applies
  what its paths render at a commit (here KubeCD's release: a chart in the
  repository, with each cluster's values file). A push that changes what a
  cluster renders rolls that commit out to those clusters through the waves,
  after flotilla confirmed the commit on the branch with its own fetch;
  Flagger analyses the change like a new image, and a failed wave restores
  the previous commit's manifests everywhere the new one went. A push that
  changes nothing tracked, or names a commit the branch does not have,
  changes nothing.

  Scenario: A push changing a cluster's values rolls that commit out there; a push changing only the README does nothing
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When a push changes "greeting" to "hej" in "clusters/c1/podinfo/values.yaml"
    Then the rollout of that commit succeeds
    And the primary in cluster "c1" runs that commit, greeting "hej"
    And the primary in cluster "c2" runs the first commit, greeting "hello"
    When a push changes only "README.md"
    Then flotilla records that the push was skipped because "changes nothing the application tracks (it changed README.md)"
    And no rollout of that commit was started

  Scenario: A config change that fails analysis is undone: the previous commit's manifests are restored fleet-wide
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c4"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c4"
    And the repository's first commit has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    When a push changes "greeting" to "broken" in "charts/podinfo/values.yaml"
    Then the rollout of that commit is rolled back
    And the primary and the workload in every cluster run the first commit, greeting "hello"

  Scenario: A commit running an image the application does not allow changes no cluster
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And the application allows only images matching "registry\.example\.com/podinfo"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When a push changes "image" to "evil.example.com/miner:1" in "charts/podinfo/values.yaml"
    Then the rollout of that commit fails because "image evil.example.com/miner:1 is not allowed"
    And the primary and the workload in every cluster run the first commit, greeting "hello"

  Scenario: A push naming a commit the branch does not have is rejected
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    When a push of a commit that is not on the branch is delivered
    Then flotilla rejects the git push because "is not on refs/heads/main"
    And no rollout of that commit was started
