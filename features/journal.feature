# Every scenario here runs in both modes (TestFeaturesScaleOut too).
@both-modes
Feature: flotilla's journal does not grow with history
  Events every consumer has handled leave the journal once they are older
  than server.retention; event ids are remembered for server.dedupeWindow.
  Rollouts do not need the journal: they survive a restart after their
  events are gone, and a webhook the registry delivers again once the
  window has passed starts nothing, saying why. In scale-out mode the
  stream on NATS keeps an event until every cursor that reads it has
  passed it, as the embedded journal does.

  Background:
    Given a registry
    And flotilla keeps handled events for 3 seconds and remembers event ids for 3 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves

  Scenario: Handled events leave the journal; a restart and a late redelivery change nothing
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And flotilla's journal has deleted the events it handled
    When flotilla is killed with SIGKILL
    And flotilla is started again
    Then `flotilla get rollouts` lists the rollout of "1.1.0" as "Succeeded"
    When the registry notification of version "1.1.0" is delivered 1 times
    Then flotilla records that "1.1.0" was skipped because "this push was delivered before"
    And exactly 1 rollout of "1.1.0" was started
    And the primary in every cluster runs version "1.1.0" by digest
