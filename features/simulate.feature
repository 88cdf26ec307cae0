Feature: What-if: users run scenarios of their own fleet config (flotilla simulate)
  `flotilla simulate --config FILE FEATURE...` runs a user's Gherkin against
  their config offline: the real engine on a virtual clock, a simulated fleet
  and Flagger. No cluster of the fleet is touched.

  # Catches a simulator whose clock is the wall clock (the two-hour bake would
  # take two hours, or the deadlines fire at once on a past virtual date), a
  # rollback order or version table not taken from the engine's own events,
  # and a report that hides the rollback.
  Scenario: 1.2.0 fails in the last wave of config/example.yaml and is rolled back, two hours of bake in seconds
    Given a user's feature "lastwave.feature":
      """
      Feature: 1.2.0 in prod
        Scenario: 1.2.0 fails in c3 after canary's two-hour bake
          Given the fleet runs "1.1.0"
          And wave "canary" bakes for 2h
          And "1.2.0" fails in wave "prod"
          When "1.2.0" is pushed
          And the rollout runs until it ends
          Then the rollout is RolledBack
          And the clusters were rolled back in the order "c2, c3, c1"
          And the clusters run:
            | cluster | version |
            | c1      | 1.1.0   |
            | c2      | 1.1.0   |
            | c3      | 1.1.0   |
          And wave "prod" started 2h0m30s after the push
      """
    When `flotilla simulate` runs it against config/example.yaml
    Then simulate passed in under 5 seconds of wall time
    And the simulate report says "rollback order: c2, c3, c1"
    And the simulate report shows cluster "c3" of wave "prod" on "1.1.0"

  # Catches a step library that lets an unknown step pass (godog's pending
  # steps pass unless strict) or fails it without naming the closest steps.
  Scenario: a step simulate does not know fails, naming the closest known ones
    Given a user's feature "typo.feature":
      """
      Feature: typo
        Scenario: a typo
          When "1.2.0" is pushd
      """
    When `flotilla simulate` runs it against config/example.yaml
    Then simulate failed
    And the simulate report says "unknown step \"\\\"1.2.0\\\" is pushd\""
    And the simulate report says "When \"1.2.0\" is pushed"

  # Signature policies simulate instead of being refused: the verify
  # function runs as configured, and pkg/signature reads real signatures
  # (made with the simulation's stand-ins of the policy's keys, in a
  # registry and a Rekor log in process) and decides. Catches a simulator
  # that refuses verify.signatures, one that fakes the verifier's decision
  # (a version signed by another key, or unsigned, would roll out), one that
  # signs nothing (the signed version would be refused), and a report that
  # does not say why a push was rejected.
  Scenario: simulate verifies signatures as configured: the trusted key's version rolls out, another key's and an unsigned one are rejected
    Given a user's feature "signatures.feature":
      """
      Feature: signed releases
        Scenario: signed by the release key
          Given the fleet runs "1.1.0"
          And application "podinfo" verifies signatures by "release"
          And "1.2.0" is signed by "release"
          When "1.2.0" is pushed
          And the rollout runs until it ends
          Then the rollout is Succeeded
          And every cluster runs "1.2.0"

        Scenario: signed by another key
          Given the fleet runs "1.1.0"
          And application "podinfo" verifies signatures by "release"
          And "1.2.0" is signed by another key
          When "1.2.0" is pushed
          And the rollout runs until it ends
          Then the push of "1.2.0" is rejected: "signature not trusted"
          And every cluster runs "1.1.0"

        Scenario: unsigned
          Given the fleet runs "1.1.0"
          And application "podinfo" verifies signatures by "release"
          And "1.2.0" is unsigned
          When "1.2.0" is pushed
          And the rollout runs until it ends
          Then the push of "1.2.0" is rejected: "is not signed"
          And every cluster runs "1.1.0"
      """
    When `flotilla simulate` runs it against config/example.yaml
    Then simulate passed in under 30 seconds of wall time
    And the simulate report says "push rejected"
    And the simulate report says "reason=signature not trusted"

  # The simulator held honest: the same story on the real local fleet (real
  # registry, clusters and Flagger, its analysis gate failing in c4) and in
  # `flotilla simulate` run against the very config flotilla served, and the
  # same decisions. Catches a simulator whose fleet model or Flagger drifts
  # from the engine's real world (a verdict the real Flagger never gives, a
  # revert order of its own, a rollout that ends otherwise).
  Scenario: simulate decides as the real fleet does when a cluster of the last wave fails
    Given a registry
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    When `flotilla simulate` runs the same story against the scenario's config: "1.1.0" failing in cluster "c4" on a fleet running "1.0.0"
    Then simulate decided as the real fleet did for "1.1.0": the waves started, each cluster's verdict, the rollback order and the outcome

  # Held honest on a bake: wave 1 bakes 40 s on the real fleet, wave 2's
  # first apply follows the bake's end (a timer of the engine). Catches a
  # virtual clock that skips the bake timer or fires it at once (wave 2
  # released by wave 1's success), and a simulator that waits for the bake
  # from another instant than the real engine does (its end would fall
  # more than 10 s off).
  Scenario: simulate decides as the real fleet does when a wave bakes
    Given a registry
    And wave 1 bakes for 40 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    When `flotilla simulate` runs this story against the scenario's config, from the real push of "1.1.0":
      """
      Feature: the real fleet's story
        Scenario: wave-1 bakes
          Given it is "{push time}"
          When "1.1.0" is pushed
          And the rollout runs until it ends
          Then the rollout is Succeeded
      """
    Then simulate decided as the real fleet did for "1.1.0": the waves started, each cluster's verdict, the rollback order, the outcome and what released each wave

  # Held honest on a freeze window: wave 2 is frozen for the minute after
  # the scenario set it up, so the real rollout's wave 2 starts at the
  # window's end; simulate starts its virtual clock at the real push's
  # instant. Catches a simulator that reads freeze windows on the wall
  # clock or not at all (wave 2 released by wave 1's success), or on
  # another time zone or instant than the engine (the release off the
  # window's end).
  Scenario: simulate decides as the real fleet does when a freeze window holds a wave
    Given a registry
    And wave 2 is frozen for the next 60 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" waits for the freeze window "features-freeze"
    And the rollout of "1.1.0" succeeds
    When `flotilla simulate` runs this story against the scenario's config, from the real push of "1.1.0":
      """
      Feature: the real fleet's story
        Scenario: wave-2 frozen
          Given it is "{push time}"
          When "1.1.0" is pushed
          And the rollout runs until it ends
          Then the rollout is Succeeded
      """
    Then simulate decided as the real fleet did for "1.1.0": the waves started, each cluster's verdict, the rollback order, the outcome and what released each wave

  # Held honest on an approval: wave 2 needs alice's approval (an API token
  # of the config's); on the real fleet she approves with `flotilla approve`
  # once c1 succeeded, in simulate with the approval step once the rollout
  # waits. Catches a simulator that does not hold the wave for the approval
  # (simulate's rollout would not wait for it, and her approval of an ended
  # rollout fail the story), and one whose approval releases nothing or
  # something else (wave 2 released otherwise than by the approval).
  Scenario: simulate decides as the real fleet does when a wave waits for an approval
    Given a registry
    And wave 2 needs the approvals of "alice"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    When "alice" approves wave 2 of the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    When `flotilla simulate` runs this story against the scenario's config, from the real push of "1.1.0":
      """
      Feature: the real fleet's story
        Scenario: wave-2 waits for alice
          Given it is "{push time}"
          When "1.1.0" is pushed
          And the rollout runs until it ends
          Then the rollout waits for "approval"
          When "alice" approves wave "wave-2"
          And the rollout runs until it ends
          Then the rollout is Succeeded
      """
    Then simulate decided as the real fleet did for "1.1.0": the waves started, each cluster's verdict, the rollback order, the outcome and what released each wave

  # Held honest on a release set of image members: the api's 1.1.0 failing
  # its analysis in c4 on the real fleet (real registry, clusters and
  # Flagger) and in `flotilla simulate` run against the very config flotilla
  # served. Compared: what both must agree on, not how one wave's clusters
  # interleave (c2 may promote before c4 fails on the fleet, or not):
  # the waves started, every verdict but c2's, the clusters rolled back
  # wave by wave (c2 and c4, then c1), the outcome, and each cluster's
  # members once it ended, read from the clusters' primaries. Catches a
  # simulated set run that differs from the real one: a rollback leaving
  # the api on 1.1.0 or moving the frontend, a cluster of the first wave
  # not reverted, one failing cluster deciding otherwise.
  Scenario: simulate decides as the real fleet does when a release set of image members fails in the last wave
    Given a registry
    And the release set "web" of "web-api" then the image application "web-frontend" that tracks "demo/web-frontend"
    And flotilla serving the application "web-api" that tracks "demo/web-api" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "web-api" runs in every cluster of the waves
    And the workload "web-frontend" runs in every cluster of the waves
    And version "1.0.0" of "web-api" is pushed
    And the rollout of "web-api:1.0.0" succeeds
    And version "2.0.0" of "web-frontend" is pushed
    And the rollout of "web-api:1.0.0,web-frontend:2.0.0" succeeds
    And the analysis gate fails for the canary "web-api" in cluster "c4"
    When version "1.1.0" of "web-api" is pushed
    Then the rollout of "web-api:1.1.0,web-frontend:2.0.0" is rolled back
    When `flotilla simulate` runs this story of the set against the scenario's config:
      """
      Feature: the real fleet's story
        Scenario: the api's 1.1.0 fails in c4
          Given the fleet runs "1.0.0" of "web-api"
          And the fleet runs "2.0.0" of "web-frontend"
          And "1.1.0" fails in cluster "c4"
          When "1.1.0" of "web-api" is pushed
          And the rollout runs until it ends
          Then the rollout is RolledBack
      """
    Then simulate agreed with the real fleet on the set's rollout of "web-api:1.1.0,web-frontend:2.0.0": the waves started, each verdict not racing a failure of its wave, the clusters rolled back wave by wave, the outcome and what each cluster's members run

  # The same for a release set of git and image members: the migration Job
  # and the api from the deployments repository, the frontend's image; the
  # api failing in c4 at the set's next commit. Simulate names the commits
  # as the real fleet ran them, so each cluster's members compare as read
  # from the clusters (the Job's commit, the api's primary's revision, the
  # frontend's primary's image). Catches a simulated run that leaves a git
  # member or the Job on the failed commit, moves the frontend, or decides
  # the set's failure otherwise than the engine on the fleet.
  Scenario: simulate decides as the real fleet does when a release set of git and image members fails in the last wave
    Given a deployments repository with the release set "shop": the Job "shop-migrate", then "shop-api", then the image application "shop-frontend" that tracks "demo/shop-frontend"
    And flotilla serving the release set "shop" in waves "c1" then "c2,c4"
    And the workload "shop-frontend" runs in every cluster of the waves
    And the set's rollout of the first commit alone succeeds
    And version "2.0.0" of "shop-frontend" is pushed
    And the set's rollout of the first commit and "2.0.0" of "shop-frontend" succeeds
    And the analysis gate fails for the canary "shop-api" in cluster "c4"
    When a push changes the greeting of the set's git members to "v2"
    Then the set's rollout of that commit and "2.0.0" of "shop-frontend" is rolled back
    When `flotilla simulate` runs this story of the set against the scenario's config:
      """
      Feature: the real fleet's story
        Scenario: that commit's api fails in c4
          Given the fleet runs "{first commit}"
          And the fleet runs "2.0.0" of "shop-frontend"
          And "{that commit}" fails in cluster "c4"
          When "{that commit}" of "shop" is pushed
          And the rollout runs until it ends
          Then the rollout is RolledBack
      """
    Then simulate agreed with the real fleet on the set's rollout of that commit and "2.0.0" of "shop-frontend": the waves started, each verdict not racing a failure of its wave, the clusters rolled back wave by wave, the outcome and what each cluster's members run
