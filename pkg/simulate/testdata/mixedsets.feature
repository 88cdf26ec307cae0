# A release set of git and image members: config/examples/release-set-mixed.yaml's
# shop, the migration Job shop-migrate and shop-api rendered from the
# deployments repository, then shop-frontend whose image CI pushes, in waves
# c1 then c2 (TestMixedSetFeature). The set's version is a tuple: each git
# member at the set's commit, the frontend at its image. A commit to the
# branch moves the git members, a push of the frontend's image the frontend,
# the other entries staying at what the fleet runs.
Feature: shop, a release set of git and image members

  Scenario: a commit rolls the set out with the frontend unchanged
    Given the fleet runs "r1"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "r2" of "shop-api" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And cluster "c2" runs "r2" of "shop-migrate"
    And cluster "c2" runs "r2" of "shop-api"
    And cluster "c2" runs "2.0.0" of "shop-frontend"
    And every cluster runs "shop-migrate r2, shop-api r2, shop-frontend 2.0.0"
    And nothing was rolled back

  Scenario: a push of the frontend's image rolls the set out at the deployed commit
    Given the fleet runs "r1"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "2.1.0" of "shop-frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "shop-migrate r1, shop-api r1, shop-frontend 2.1.0"

  Scenario: the frontend's push before the set has a commit is skipped, saying why
    Given the fleet runs "2.0.0" of "shop-frontend"
    When "2.1.0" of "shop-frontend" is pushed
    And the rollout runs until it ends
    Then the push of "2.1.0" is skipped: "release set shop has no commit of its git members yet: push to its branch first"
    And cluster "c1" runs "2.0.0" of "shop-frontend"

  Scenario: the api failing in wave 2 rolls every member back everywhere
    Given the fleet runs "r1"
    And the fleet runs "2.0.0" of "shop-frontend"
    And "r2" fails in cluster "c2"
    When "2.1.0" of "shop-frontend" is pushed
    And "r2" of "shop" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And the clusters were rolled back in the order "c2, c1"
    And every cluster runs "shop-migrate r1, shop-api r1, shop-frontend 2.0.0"

  Scenario: a push of the frontend while the commit's rollout runs carries both
    Given the fleet runs "r1"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "r2" of "shop-api" is pushed
    And 1m passes
    And "2.1.0" of "shop-frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "shop-migrate r2, shop-api r2, shop-frontend 2.1.0"
