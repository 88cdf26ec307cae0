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
    # Exactly 2h0m40s when the engine settles between jumps; a loaded
    # machine has seen 2h1m0s (the simulator's idle check is a heuristic:
    # see pkg/simulate's engine.settle), hence a bound, not the instant.
    And the rollout ended within 2h2m of the push

  Scenario: a step simulate does not know
    When "1.2.0" is pushed
    And the moon is full
