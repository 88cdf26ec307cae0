Feature: signed releases (verify.signatures, simulated with stand-in keys)

  Scenario: a version signed by the trusted key rolls out
    Given the fleet runs "1.1.0"
    And application "podinfo" verifies signatures by "release"
    And "1.2.0" is signed by "release"
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "1.2.0"

  Scenario: a version signed by another key is refused
    Given the fleet runs "1.1.0"
    And application "podinfo" verifies signatures by "release"
    And "1.2.0" is signed by another key
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the push of "1.2.0" is rejected: "signature not trusted"
    And every cluster runs "1.1.0"

  Scenario: an unsigned version is refused
    Given the fleet runs "1.1.0"
    And application "podinfo" verifies signatures by "release"
    And "1.2.0" is unsigned
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the push of "1.2.0" is rejected: "is not signed"
    And every cluster runs "1.1.0"

  Scenario: a version the scenario says nothing of is signed by the first key, without a log entry when the policy ignores the log
    Given the fleet runs "1.1.0"
    And application "podinfo" verifies signatures by "release" ignoring the transparency log
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "1.2.0"
