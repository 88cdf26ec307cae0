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

  Scenario: Auto-merge: each wave's pull request merges itself, squashed, once the check main requires passes
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And the pull requests merge themselves by "squash" once the checks main requires pass
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Gitea sends its pull request webhooks to flotilla
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster by its pull requests merging themselves
    And main requires the status check "ci/test" to pass before a merge
    When version "1.1.0" is pushed
    Then wave 1 of the rollout of "1.1.0" waits for a pull request naming the version, its digest and its waves
    And the pull request of wave 1 of "1.1.0" is set to merge itself once its checks pass
    When the check "ci/test" passes on the pull request of wave 1 of "1.1.0"
    Then wave 2 of the rollout of "1.1.0" waits for a pull request naming the version, its digest and its waves
    And the primary in clusters "c1" runs version "1.1.0" by digest
    When the check "ci/test" passes on the pull request of wave 2 of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And the Gitea repository pins version "1.1.0" by digest for clusters "c1,c2"
    And main took each pull request of "1.1.0" as one squashed commit

  Scenario: A newer version supersedes a rollout waiting for its pull request, which flotilla closes
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Gitea sends its pull request webhooks to flotilla
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster by merging its pull requests
    When version "1.1.0" is pushed
    Then wave 1 of the rollout of "1.1.0" waits for a pull request naming the version, its digest and its waves
    When version "1.2.0" is pushed
    Then the pull request of wave 1 of "1.1.0" is closed with a comment naming the rollout of "1.2.0"
    And wave 1 of the rollout of "1.2.0" waits for a pull request naming the version, its digest and its waves
    When the pull request of wave 1 of "1.2.0" is merged
    And the pull request of wave 2 of "1.2.0" is merged
    Then the rollout of "1.2.0" succeeds
    And no workload in any cluster runs version "1.1.0"
    And the Gitea repository pins version "1.2.0" by digest for clusters "c1,c2"

  Scenario: Gitea fails a wave's merge a few times, then merges it: the wave starts, and the rollout said what it waited for on the way
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And the pull requests merge themselves by "merge" once the checks main requires pass
    And Gitea's API answers flotilla's first 3 merge requests with 500
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Gitea sends its pull request webhooks to flotilla
    And what flotilla's rollouts wait for is watched
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest
    And Gitea answered 3 merge requests with 500 and merged the pull request of each wave of "1.0.0"
    And while wave 1 of "1.0.0" waited, the rollout said its pull request was open and Gitea asked to merge it, then that the merge failed with Gitea's answer and when it would ask again

  Scenario: Gitea keeps failing a wave's merge: the wave waits, saying so with Gitea's answer, and `flotilla retry` merges it once Gitea recovers
    Given a registry
    And the application keeps its image in a Gitea repository and rolls out by pull request
    And the pull requests merge themselves by "merge" once the checks main requires pass
    And flotilla asks Gitea again for "6s" after a merge fails
    And Gitea's API answers every merge request from flotilla with 500
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    Then wave 1 of the rollout of "1.0.0" says merging its pull request failed with Gitea's answer and that `flotilla retry` asks again
    And the pull request of wave 1 of "1.0.0" is open and not merged on Gitea
    And no workload in any cluster runs version "1.0.0"
    When Gitea's API answers merge requests again
    And `flotilla retry` is run for the rollout of "1.0.0"
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest
    And the Gitea repository pins version "1.0.0" by digest for clusters "c1,c2"
