Feature: Which version rolls out: newer ones supersede or queue, the baseline is what the fleet runs
  By default a newer version of an application supersedes its rollout in
  flight: that rollout ends Superseded, nothing of it is rolled back, and
  the new one takes the clusters over from wave 1. With onNewVersion: queue
  the newer version waits for the rollout in flight to end. A version is
  compared with what the fleet last ran successfully, so a hotfix after a
  rolled back version rolls out, and so does a tag pushed again with a new
  digest.

  Background:
    Given a registry

  Scenario: A hotfix after a rolled back version rolls out
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    When the analysis gate passes again in cluster "c2"
    And version "1.0.1" is pushed
    Then the rollout of "1.0.1" succeeds
    And the primary in every cluster runs version "1.0.1" by digest

  Scenario: A tag pushed again with a new digest rolls out
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.0.0" is built again and pushed
    Then the primary in every cluster comes to run the rebuilt "1.0.0" by digest

  @both-modes
  Scenario: A newer version supersedes the rollout in flight
    Given the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And the canary in cluster "c1" waits for promotion
    And version "1.2.0" is pushed
    Then the rollout of "1.1.0" is "Superseded"
    When the rollout of "1.2.0" is approved with `flotilla approve`
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest
    And no workload in any cluster runs version "1.1.0"

  Scenario: A newer version queues behind the rollout in flight
    Given the application will be validated manually
    And the application queues newer versions
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And the canary in cluster "c1" waits for promotion
    And version "1.2.0" is pushed
    Then the rollout of "1.2.0" is "Queued"
    When the rollout of "1.1.0" is approved with `flotilla approve`
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    When the rollout of "1.2.0" is approved with `flotilla approve`
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest

  Scenario: After overlapping versions, a rollback restores the primary's image, never one that was not validated
    Given the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And the canary in cluster "c1" waits for promotion
    And the analysis gate fails in cluster "c1"
    And version "1.2.0" is pushed
    Then the rollout of "1.1.0" is "Superseded"
    And the rollout of "1.2.0" is rolled back
    And no workload in any cluster runs version "1.1.0"
    And the primary in every cluster runs version "1.0.0" by digest

  Scenario: A semver constraint and pre-releases decide which versions roll out
    Given the application rolls out only versions "<1.2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.2.0" is pushed
    Then flotilla records that "1.2.0" was skipped because "does not satisfy the constraint"
    When version "1.1.0-rc.1" is pushed
    Then flotilla records that "1.1.0-rc.1" was skipped because "is a pre-release"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: A tag filter admits only matching tags and compares what it extracts
    Given the application rolls out only tags matching "^release-(?P<v>[0-9.]+)$", compared as "$v"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "release-1.0.0" has been rolled out to every cluster
    When version "snapshot-1.1.0" is pushed
    Then flotilla records that "snapshot-1.1.0" was skipped because "does not match the tag filter"
    When version "release-0.9.0" is pushed
    Then flotilla records that "release-0.9.0" was skipped because "0.9.0 is older than the current 1.0.0"
    When version "release-1.1.0" is pushed
    Then the rollout of "release-1.1.0" succeeds
    And the primary in every cluster runs version "release-1.1.0" by digest

  Scenario: A tag the application denies never rolls out; the next version does
    Given the application never rolls out tags matching "1\.1\.0|.*-debug"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then flotilla records that "1.1.0" was skipped because "matches the application's denyTags pattern"
    And no rollout of "1.1.0" was started
    When version "1.2.0" is pushed
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest
    And no workload in any cluster runs version "1.1.0"

  Scenario: Track Newest follows when images were built, not when their pushes arrived
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "Newest" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "build-b" built 10 minutes ago is pushed
    Then the rollout of "build-b" succeeds
    When version "build-a" built 20 minutes ago is pushed
    Then flotilla records that "build-a" was skipped because "track Newest follows when images were built"
    When version "build-c" built 1 minutes ago is pushed
    Then the rollout of "build-c" succeeds
    And the primary in every cluster runs version "build-c" by digest
