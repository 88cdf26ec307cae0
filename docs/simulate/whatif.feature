# What-if scenarios of config/example.yaml (waves canary: c1; prod: c2, c3).
# Run them: flotilla simulate --config config/example.yaml docs/simulate/whatif.feature
# pkg/simulate's tests run this file, so every example here works.
Feature: What if, on the example fleet

  Scenario: a freeze window over the weekend holds prod until Monday
    Given it is "2026-12-04T16:00:00Z"
    And the fleet runs "1.1.0"
    And wave "canary" bakes for 2h
    And a freeze window "weekend" on schedule "0 17 * * 5" for 64h in wave "prod"
    When "1.2.0" is pushed
    And 3h passes
    Then the rollout waits for "weekend"
    And cluster "c1" runs "1.2.0"
    And cluster "c2" runs "1.1.0"
    When the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "1.2.0"
    And the rollout ended 65h0m30s after the push

  Scenario: prod waits for a person's approval
    Given the fleet runs "1.1.0"
    And wave "prod" needs 1 approval
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout waits for "approval"
    And cluster "c2" runs "1.1.0"
    When "alice" approves wave "prod"
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "1.2.0"

  Scenario: an unreachable cluster fails its wave and the version is rolled back
    Given the fleet runs "1.1.0"
    And cluster "c3" is unreachable
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And cluster "c1" runs "1.1.0"

  Scenario: a version that hangs in prod fails at its deadline
    Given the fleet runs "1.1.0"
    And "1.2.0" hangs in cluster "c2"
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And every cluster runs "1.1.0"
    And the rollout ended 40m30s after the push
