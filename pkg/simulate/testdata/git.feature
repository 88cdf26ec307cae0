# A git application of config/example.yaml (frontend: the same waves as
# podinfo, canary c1 then prod c2 and c3): a commit pushed to its branch
# or a tag its pattern matches, applied at once by the simulated executor.
Feature: frontend, a git application

  Scenario: a commit to frontend's branch rolls out; podinfo runs what it ran
    Given the fleet runs "r1"
    When "r2" of "frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "r2"
    And cluster "c2" runs "r1" of "podinfo"

  Scenario: a commit to frontend's branch fails in c3 and is rolled back
    Given the fleet runs "r1"
    And "r2" fails in cluster "c3"
    When "r2" of "frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And the clusters were rolled back in the order "c2, c3, c1"
    And every cluster runs "r1"

  Scenario: a tag frontend's pattern matches rolls out
    Given the fleet runs "frontend-v1.1.0"
    When "frontend-v1.2.0" of "frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "frontend-v1.2.0"
