Feature: The config file reloads live
  `flotilla serve` reloads its config file when it changes (and on
  SIGHUP), validated first as `flotilla config check` validates it: a
  valid edit is in force at once without a restart and without losing a
  rollout in flight, which keeps the plan it started with (its waves,
  their clusters and policy); an invalid one is refused, the running
  config stays, and the log (an error) and the metrics say why.

  Background:
    Given a registry

  # Catches a config read once at start-up (the application added is never
  # rolled out), a reload that restarts the engine or drops the rollout in
  # flight (1.1.0 does not finish), and one that re-plans a rollout in
  # flight with the new wave policy (1.1.0 would wait for wave 2's new
  # approval) instead of keeping it for the rollouts that start after.
  Scenario: The file config edited while a rollout is in flight: reloaded, the rollout goes on
    Given wave 1 bakes for 20 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "second" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And an edit of the config file adds the application "second" that tracks "demo/second"
    And an edit of the config file makes wave 1 bake for 0 seconds
    And an edit of the config file makes wave 2 need 1 approval
    And the edited config file is saved
    Then flotilla applies the edited config
    And the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    When version "2.5.0" of "second" is pushed
    Then the rollout of "2.5.0" waits for an approval of wave 2
    And the primary of "second" in clusters "c1" runs version "2.5.0" by digest
    And the workload "second" in clusters "c2" still runs its first image

  # Catches an invalid file applied (or half applied: the application's
  # rollouts would stop), a reload that takes the process down, and a
  # refusal said only at debug level or not counted.
  Scenario: An invalid edit of the file config: flotilla keeps the old config and says why
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When an edit of the config file puts "podinfo" on track "Sometimes"
    And the edited config file is saved
    Then flotilla refuses the edited config as "invalid", an error in its log naming "applications[0].track"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches the clusters' labels (and so the waves' members) read once at
  # start-up: c2 would still be in wave 2 and analysed beside c3.
  Scenario: A cluster's label edited in the file config moves it to another wave for the next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2,c3" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And wave 2 rolls out 2 clusters at a time
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c3"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When an edit of the config file labels cluster "c2" "tier=canary"
    And the edited config file is saved
    Then flotilla applies the edited config
    When the canaries in clusters "c1,c2,c3" are watched
    And version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And the canary in cluster "c3" began its analysis only after those in clusters "c1,c2" succeeded

  # Catches the clusters' clients made once at start-up: c4, added to the
  # file while flotilla runs, would be refused as needing a restart, or be
  # in the wave without a client (its run fails, the rollout with it), or
  # be left out of the wave its label selects (its primary stays on 1.0.0).
  Scenario: A cluster added to the file config while flotilla runs is in its wave's next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When an edit of the config file adds cluster "c4" labelled "tier=prod"
    And the edited config file is saved
    Then flotilla applies the edited config
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in cluster "c4" runs version "1.1.0" by digest
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches a removed cluster kept in the rollout in flight (c4 would be
  # started without a client: the rollout fails and rolls back, or waits
  # for c4 until its deadline) and one touched after it left (its primary
  # would run 1.1.0).
  @both-modes
  Scenario: A cluster removed from the file config while a rollout is in flight: the rollout finishes with the clusters that remain
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2,c4" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And wave 1 bakes for 20 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And an edit of the config file removes cluster "c4"
    And the edited config file is saved
    Then flotilla applies the edited config
    And the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" shows cluster "c4" removed from the fleet
    And the primary in every cluster runs version "1.1.0" by digest
    And the primary in cluster "c4" runs version "1.0.0" by digest
