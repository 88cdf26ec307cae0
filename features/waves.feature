Feature: Fleet rollouts users can steer: targeting and wave policy
  An application goes only to the clusters its label selector picks. A wave
  rolls out at most maxParallel of its clusters at a time, succeeds when no
  more than maxFailures of them failed, and must then stay healthy for its
  bake time before the next wave starts.

  Scenario: An application targeted by labels reaches only its clusters, in waves chosen by labels
    Given a registry
    And clusters "c1,c3" are labelled "region=eu"
    And clusters "c2,c4" are labelled "region=us"
    And clusters "c3,c4" are labelled "tier=late"
    And wave 2 is the clusters labelled "tier=late"
    And the application goes only to clusters labelled "region=eu"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1,c2" then "c3,c4"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in clusters "c1,c3" runs version "1.1.0" by digest
    And clusters "c2,c4" have no canary of the application

  Scenario: A wave that rolls out one cluster at a time never has two canaries progressing at once
    Given a registry
    And wave 2 rolls out 1 cluster at a time
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c3,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the canaries in clusters "c2,c3,c4" are watched
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And no two canaries in clusters "c2,c3,c4" were progressing at once

  Scenario: A failure within the wave's budget lets the wave pass
    Given a registry
    And wave 2 may lose 1 cluster
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c3,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c3"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" names cluster "c3" as failed within the budget
    And the primary in clusters "c1,c2,c4" runs version "1.1.0" by digest
    And the primary in clusters "c3" runs version "1.0.0" by digest

  Scenario: After a cluster failed within the budget, the next version through it is analysed afresh
    Given a registry
    And wave 2 may lose 1 cluster
    And the canaries ask a confirm-rollout gate first, which opens
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c3"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c3"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" names cluster "c3" as failed within the budget
    When the analysis gate passes again in cluster "c3"
    And version "1.2.0" is pushed
    Then the rollout of "1.2.0" succeeds
    And the confirm-rollout gate was asked in cluster "c3" while its canary was "Failed"
    And the primary in every cluster runs version "1.2.0" by digest

  Scenario: A canary failing during its wave's bake fails the wave, and the rollout rolls back
    Given a registry
    And wave 1 bakes for 30 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And the analysis gate fails in cluster "c1"
    And the workload "podinfo" in cluster "c1" is changed, so that Flagger analyses it again
    Then the rollout of "1.1.0" is rolled back
    And the rollout of "1.1.0" failed naming the bake of cluster "c1"
    And no workload in any cluster runs version "1.1.0"

  # Flagger's failed analysis ends by recording the workload's template as
  # applied: a revert applied in between is recorded as seen and never taken
  # up (the primary stays on 1.1.0). The steps write what Flagger's write
  # leaves into the real Flagger's canary status (its own hash of 1.0.0's
  # template, kept from when it promoted it).
  # Catches: a rollback that waits for such a revert until its deadline and
  # ends RollbackFailed (CI, 2026-12-03: waves' bake scenario).
  Scenario: A revert Flagger recorded as seen while failing the canary is applied again, and the rollback ends
    Given a registry
    And wave 1 bakes for 120 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And Flagger's promoted spec of version "1.0.0" in cluster "c1" is kept
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And Flagger in cluster "c1" has recorded the workload at version "1.0.0" as applied
    And `flotilla quarantine` is run for version "1.1.0"
    And Flagger in cluster "c1" fails the canary after the revert of "1.1.0" ended there
    Then the rollout of "1.1.0" is rolled back
    And the revert in cluster "c1" was applied again with a restart
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
