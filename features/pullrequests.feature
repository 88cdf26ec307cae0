Feature: GitOps by pull request: each wave waits for its merge (KubeCD)
  An application whose deployments repository takes changes by pull request
  rolls out wave by wave: flotilla pushes one branch per wave with every
  cluster file of the wave and opens a pull request naming the rollout, the
  version, its digest and the waves; the wave's clusters start once the pull
  request is merged. Closing it without merging aborts the rollout, and a
  rollback opens a revert pull request that puts the previous version back.
  The repository lives on a real Gitea server; flotilla learns of merges
  from Gitea's webhooks, or by reading the pull request when none come.

  Scenario: Each wave waits for its pull request; merging it starts the wave
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Gitea sends its pull request webhooks to flotilla
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster by merging its pull requests
    When version "1.1.0" is pushed
    Then wave 1 of the rollout of "1.1.0" waits for a pull request naming the version, its digest and its waves
    And no workload in any cluster runs version "1.1.0"
    When the pull request of wave 1 of "1.1.0" is merged
    Then wave 2 of the rollout of "1.1.0" waits for a pull request naming the version, its digest and its waves
    And the primary in clusters "c1" runs version "1.1.0" by digest
    When the pull request of wave 2 of "1.1.0" is merged
    Then the rollout of "1.1.0" succeeds
    And the Gitea repository pins version "1.1.0" by digest for clusters "c1,c2"

  Scenario: Closing a wave's pull request without merging it aborts the rollout (seen by polling)
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster by merging its pull requests
    When version "1.1.0" is pushed
    And the pull request of wave 1 of "1.1.0" is closed without merging
    Then the rollout of "1.1.0" is rolled back because "aborted by pull request"
    And no workload in any cluster runs version "1.1.0"
    And the Gitea repository pins version "1.0.0" by digest for clusters "c1,c2"

  Scenario: A rollback puts the previous version back through a revert pull request
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c4"
    And Gitea sends its pull request webhooks to flotilla
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster by merging its pull requests
    And the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    And the pull requests of "1.1.0" are merged as they open
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And the Gitea repository pins version "1.0.0" by digest for clusters "c1,c4"
