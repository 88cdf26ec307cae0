Feature: GitOps: the version is committed to a deployments repository (KubeCD)
  An application may keep its image in a deployments git repository: each
  cluster's rollout first commits the version there (comments and order of the
  file kept, a message naming the rollout), then applies the canary; a
  rollback commits the previous version back, so a GitOps agent syncing the
  repository never re-applies a failed version.

  Scenario: A rollout commits the version for every cluster
    Given a registry
    And the application keeps its image in a deployments repository
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the deployments repository pins version "1.1.0" by digest for clusters "c1,c2"
    And its history names the rollout of "1.1.0"

  Scenario: A rollback commits the previous version back
    Given a registry
    And the application keeps its image in a deployments repository
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And the deployments repository pins version "1.0.0" by digest for clusters "c1,c4"
