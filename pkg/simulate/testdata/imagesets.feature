# A release set of image members: config/examples/release-set-images.yaml's
# shop, shop-api then shop-frontend, in waves c1 then c2 (TestImageSetFeature).
# A push of one member's image is the set's: the set's version is that
# member at the pushed tag and the other at what the fleet runs.
Feature: shop, a release set of image members

  Scenario: a push of the api rolls the set out with the frontend unchanged
    Given the fleet runs "1.0.0"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "1.1.0" of "shop-api" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And cluster "c2" runs "1.1.0" of "shop-api"
    And cluster "c2" runs "2.0.0" of "shop-frontend"
    And every cluster runs "shop-api 1.1.0, shop-frontend 2.0.0"
    And nothing was rolled back

  Scenario: a tag outside the api's track is skipped, saying why
    Given the fleet runs "1.0.0"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "2.0.0" of "shop-api" is pushed
    And the rollout runs until it ends
    Then the push of "2.0.0" is skipped: "shop-api: 2.0.0 is a major upgrade of 1.0.0"
    And every cluster runs "shop-api 1.0.0, shop-frontend 2.0.0"

  Scenario: the api failing in wave 2 rolls both members back everywhere
    Given the fleet runs "1.0.0"
    And the fleet runs "2.0.0" of "shop-frontend"
    And "1.1.0" fails in cluster "c2"
    When "2.1.0" of "shop-frontend" is pushed
    And "1.1.0" of "shop-api" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And the clusters were rolled back in the order "c2, c1"
    And every cluster runs "shop-api 1.0.0, shop-frontend 2.0.0"

  Scenario: a push of the frontend while the api's rollout runs carries both
    Given the fleet runs "1.0.0"
    And the fleet runs "2.0.0" of "shop-frontend"
    When "1.1.0" of "shop-api" is pushed
    And 1m passes
    And "2.1.0" of "shop-frontend" is pushed
    And the rollout runs until it ends
    Then the rollout is Succeeded
    And every cluster runs "shop-api 1.1.0, shop-frontend 2.1.0"
