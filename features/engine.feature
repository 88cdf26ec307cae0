Feature: One stuck application never holds up another
  flotilla handles the events of one rollout (or of one pushed image) in
  order, and different ones in parallel: a registry that never answers, a
  frozen cluster or a long pipeline holds up only what needs it. Every call
  has a deadline, so nothing waits on it forever either.

  Background:
    Given a registry
    And a second application "stuck" whose registry never answers
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster

  Scenario: Pushes of an image whose registry hangs do not delay another application's rollout
    When 5 pushes of "stuck" are notified
    And version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
