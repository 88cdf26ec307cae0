Feature: Rollouts in flight never wait for each other
  Each rollout's events are handled in order, different rollouts in
  parallel, and no function waits for a cluster: a rollout held at a gate,
  or a flotilla restarted mid-way, holds up nothing else.

  Background:
    Given a registry
    And a second application "bravo" that tracks "demo/bravo" in the same waves

  Scenario: Two applications roll out at once; one held at its gate for a minute does not hold the other
    Given the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "bravo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And version "2.0.0" of "bravo" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And version "2.1.0" of "bravo" is pushed
    Then the canary in cluster "c1" has waited for promotion for 60 seconds
    And the rollout of "2.1.0" succeeds
    And the primary of "bravo" in every cluster runs version "2.1.0" by digest
    And the rollout of "1.1.0" is still in flight
    When the rollout of "1.1.0" is approved with `flotilla approve`
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: flotilla killed with SIGKILL while two rollouts are in flight completes both after a restart, running no step twice
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "bravo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And version "2.0.0" of "bravo" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And version "2.1.0" of "bravo" is pushed
    And wave 1 of the rollouts of "1.1.0" and "2.1.0" has been applied
    And flotilla is killed with SIGKILL
    And flotilla is started again
    Then the rollout of "1.1.0" succeeds
    And the rollout of "2.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And the primary of "bravo" in every cluster runs version "2.1.0" by digest
    And no cluster was applied twice for one step, as its API server recorded
