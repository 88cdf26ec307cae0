Feature: 1.2.0 in the last wave

  Scenario: 1.2.0 fails in prod after canary's two-hour bake and is rolled back
    Given the fleet runs "1.1.0"
    And wave "canary" bakes for 2h
    And "1.2.0" fails in cluster "c3"
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And the clusters were rolled back in the order "c2, c3, c1"
    And every cluster runs "1.1.0"
    # The instant, not a bound: idleness is exact (engine.settle), so a
    # loaded machine lands on the same virtual instants.
    And the rollout ended 2h0m40s after the push

  Scenario: a step simulate does not know
    When "1.2.0" is pushed
    And the moon is full
