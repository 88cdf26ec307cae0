Feature: Approvers are people, in the simulation as in the API

  Scenario: prod needs two release managers: automation, the pusher and others do not count
    Given the fleet runs "1.1.0"
    And wave "prod" needs 2 approvals from "group:release-managers" with separation of duties
    And "alice" is in group "release-managers"
    And "bob" is in group "release-managers"
    And "carol" is in group "release-managers"
    When "1.2.0" is pushed by "alice"
    And the rollout runs until it ends
    Then the rollout waits for "approval"
    When "default" approves wave "prod" and is refused: "default is automation and never counts as an approver"
    And "alice" approves wave "prod" and is refused: "alice pushed 1.2.0 and may not approve its rollout (separationOfDuties)"
    And "dave" approves wave "prod" and is refused: "dave is not among those who may approve wave 2 (prod): group:release-managers"
    And "bob" approves wave "prod"
    And the rollout runs until it ends
    Then the rollout waits for "needs 1 more approval from group:release-managers"
    When "carol" approves wave "prod"
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "1.2.0"

  Scenario: an approval the API refuses fails its step
    Given the fleet runs "1.1.0"
    And wave "prod" needs 1 approval
    When "1.2.0" is pushed
    And the rollout runs until it ends
    And "default" approves wave "prod"
