Feature: Every cluster step has a deadline, and nothing waits on a cluster
  No function waits for a cluster: a pipeline run is requested and its end
  comes back as an event. Every cluster step (the run that applies a
  version and Flagger's analysis, or a revert) has a deadline; when it
  passes, flotilla reads the cluster and decides. A cluster that cannot be
  reached fails at its deadline, the fleet is rolled back, and a revert that
  cannot be done ends the rollback RollbackFailed, naming the cluster, until
  `flotilla retry` finishes it.

  Background:
    Given a registry

  Scenario: A pipeline that hangs in one cluster fails that cluster at its deadline and delays no other rollout
    Given every cluster step has a deadline of 40 seconds
    And a second application "bravo" that tracks "demo/bravo" in the same waves
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "bravo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And version "2.0.0" of "bravo" has been rolled out to every cluster
    And every change to the workload "podinfo" in cluster "c2" hangs
    When version "1.1.0" is pushed
    And version "2.1.0" of "bravo" is pushed
    Then the rollout of "2.1.0" ended before the rollout of "1.1.0" failed
    And the rollout of "1.1.0" fails, naming cluster "c2" and its deadline
    And the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
    And the primary of "bravo" in every cluster runs version "2.1.0" by digest

  Scenario: A cluster whose API server stops mid-wave fails at its deadline; the fleet is rolled back, and a retry finishes the revert once it is back
    Given every cluster step has a deadline of 20 seconds
    And flotilla reaches cluster "c2" through a connection that can freeze
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And cluster "c2" has taken the rollout of "1.1.0"
    And flotilla's connection to cluster "c2" freezes, as if its API server stopped
    Then the rollout of "1.1.0" fails, naming cluster "c2" and its deadline
    And the rollout of "1.1.0" ends RollbackFailed, naming cluster "c2"
    When flotilla's connection to cluster "c2" comes back
    And `flotilla retry` is run for the rollout of "1.1.0"
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
