# A release set of config/example.yaml's frontend and a copy of it,
# frontend-api, that frontend depends on (TestReleaseSet writes the
# config): the set "web" rolls out as one application through the waves,
# canary c1 then prod c2 and c3, its members with it.
Feature: web, a release set of frontend-api and frontend

  Scenario: a commit to the set rolls out through the waves with every member
    Given the fleet runs "r1"
    And wave "canary" bakes for 1h
    When "r2" of "web" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "r2"
    And cluster "c3" runs "r2" of "frontend-api"
    And cluster "c3" runs "r2" of "frontend"
    And cluster "c2" runs "r1" of "podinfo"
    And wave "prod" started 1h2m30s after the push

  Scenario: a push of a member is the set's, and the set fails in c3 and is rolled back everywhere
    Given the fleet runs "r1"
    And "r2" fails in cluster "c3"
    When "r2" of "frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And the clusters were rolled back in the order "c2, c3, c1"
    And every cluster runs "r1"
    And cluster "c1" runs "r1" of "frontend-api"

  Scenario: the set waits for the freeze window, then for prod's approval
    Given it is "2026-12-04T18:00:00Z"
    And the fleet runs "r1"
    And a freeze window "friday" on schedule "0 17 * * 5" for 64h
    And wave "prod" needs 1 approval
    When "r2" of "web" is pushed
    And 30m passes
    Then the rollout waits for "friday"
    And cluster "c1" runs "r1" of "frontend"
    When 63h passes
    Then the rollout waits for "approval"
    And cluster "c1" runs "r2" of "frontend"
    And cluster "c2" runs "r1" of "frontend-api"
    When "alice" approves wave "prod"
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "r2"
