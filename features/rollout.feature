# Every scenario here runs in both modes: embedded, and scale-out on three
# replicas (TestFeaturesScaleOut).
@both-modes
Feature: A registry push carried through two waves of real clusters, and back
  flotilla serve (a real process, with its embedded store) receives the push
  notifications of a real registry, verifies the tag's digest there, and rolls
  that digest out with the real Flagger of each cluster: wave 1 is c1, wave 2 is
  c2 and c4. A wave that fails rolls every cluster back to its previous digest.

  Background:
    Given a registry
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster

  Scenario: A good version reaches every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And Flagger reported "Succeeded" for "1.1.0" through its post-rollout hook in every cluster
    And `flotilla get rollouts` lists the rollout of "1.1.0" as "Succeeded", of kind "push"
    And `flotilla describe rollout` of "1.1.0" shows every cluster "Succeeded"

  Scenario: A failing gate in wave 2 rolls the whole fleet back
    Given the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
    And `flotilla describe rollout` of "1.1.0" shows cluster "c4" "Failed, reverted" and every other cluster "Reverted"

  Scenario: flotilla killed with SIGKILL mid-rollout completes it after a restart
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" has been applied
    And flotilla is killed with SIGKILL
    And flotilla is started again
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: The same notification delivered three times starts one rollout
    When the registry notification of version "1.1.0" is delivered 3 times
    Then the rollout of "1.1.0" succeeds
    And exactly 1 rollout of "1.1.0" was started

  Scenario Outline: A push the version policy refuses starts nothing
    When version "<version>" is pushed
    Then flotilla records that "<version>" was skipped because "<reason>"
    And no rollout of "<version>" was started

    Examples:
      | version | reason                              |
      | 0.9.0   | older than the current 1.0.0        |
      | 2.0.0   | track MinorVersion                  |

  Scenario: A GitHub push with a wrong signature is refused
    When a GitHub push signed with the wrong secret is delivered
    Then flotilla answers 401
    And flotilla recorded no git push
