Feature: Kanary's validations, decided by flotilla's own gates
  An application may be validated manually (a canary is promoted only once
  someone runs `flotilla approve`) or by watching for invalidation labels (a
  canary whose pods get one is rolled back). flotilla renders Flagger's
  confirm-promotion and rollback hooks pointing at itself and answers them;
  the real Flagger of each cluster acts on the answers.

  Scenario: A manual validation holds promotion until approved
    Given a registry
    And the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the canary in cluster "c1" waits for promotion
    And the primary in every cluster runs version "1.0.0" by digest
    When the rollout of "1.1.0" is approved with `flotilla approve`
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: An invalidation label on the canary's pods rolls the fleet back
    Given a registry
    And the application will be validated by watching for the pod label "monitoring-alert=high-cpu"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the canary in cluster "c1" waits for promotion
    When the canary's pods in cluster "c1" get the label "monitoring-alert=high-cpu"
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
