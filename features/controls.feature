Feature: Users steer rollouts: pause, resume, abort, stop the line, approve waves, freeze windows, quarantine, roll back
  Every control is an API call with a named token, journaled as an event.
  A paused rollout starts no cluster until it is resumed; an aborted one
  rolls back what it touched; a stopped fleet starts no rollout anywhere
  until it is started again.

  The controls are judged from the clusters: a held cluster's Deployments
  and Canary are watched, as its API server reports every change, from
  before the push until the release, and must not change (no image, no
  annotation, no Canary applied or progressing); once released, the
  primaries run the new digest. Flotilla's API saying "Pending" is checked
  too, but it alone would pass a launch that applies a held wave while it
  reports it Pending.

  Background:
    Given a registry

  # Catches: a launch that applies the paused rollout's wave 2 (its Canary,
  # its image) while the API lists c2 Pending, or before the resume; a
  # resume that releases nothing (the primaries' digest).
  @both-modes
  Scenario: A paused rollout starts no cluster until it is resumed
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the application's objects in clusters "c2" are watched
    When version "1.1.0" is pushed
    And `flotilla pause` is run for the rollout of "1.1.0"
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 10 seconds
    When `flotilla resume` is run for the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches: an abort that lets c1's waiting canary be promoted before it
  # reverts it (a primary ran 1.1.0), one that starts wave 2 or "reverts"
  # c2, which never took 1.1.0 (c2 changed), one that reverts nothing.
  Scenario: An aborted rollout rolls back what it touched
    Given the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the application's objects in clusters "c1,c2" are watched
    When version "1.1.0" is pushed
    And the canary in cluster "c1" waits for promotion
    And `flotilla abort` is run for the rollout of "1.1.0"
    Then the rollout of "1.1.0" is rolled back
    And no workload in any cluster runs version "1.1.0"
    And no primary in clusters "c1,c2" ran version "1.1.0" while watched
    And clusters "c2" are unchanged while watched

  # Catches: a stopped fleet that still applies either application's
  # canary or image anywhere (the API listing every cluster Pending), or
  # starts before `fleet start`; a start that releases nothing.
  Scenario: Stopping the line holds every application until it is started again
    Given a second application "bravo" that tracks "demo/bravo" in the same waves
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "bravo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And version "2.0.0" of "bravo" has been rolled out to every cluster
    And the application's objects in clusters "c1,c2" are watched
    When `flotilla fleet stop` is run
    And version "1.1.0" is pushed
    And version "2.1.0" of "bravo" is pushed
    Then no cluster takes the rollouts of "1.1.0,2.1.0" for 10 seconds
    When `flotilla fleet start` is run
    Then the rollout of "1.1.0" succeeds
    And the rollout of "2.1.0" succeeds
    And clusters "c1,c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the primary of "bravo" in every cluster runs version "2.1.0" by digest

  # Catches: a retry that releases the next wave, which still waits for
  # alice (c3 changed before her approval); a retry that re-applies the
  # version without a new revision (Flagger would not analyse it again).
  Scenario: A cluster that failed within its wave's budget is retried, and Flagger analyses it again
    Given wave 1 may lose 1 cluster
    And wave 2 needs the approvals of "alice"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1,c2" then "c3"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    And "alice" approves wave 2 of the rollout of "1.0.0"
    Then the rollout of "1.0.0" succeeds
    And the application's objects in clusters "c3" are watched
    When the analysis gate fails in cluster "c2"
    And version "1.1.0" is pushed
    Then cluster "c2" of the rollout of "1.1.0" has failed
    And cluster "c1" of the rollout of "1.1.0" has succeeded
    And the primary in clusters "c2" runs version "1.0.0" by digest
    When the analysis gate passes again in cluster "c2"
    And `flotilla retry --cluster c2` is run for the rollout of "1.1.0"
    Then cluster "c2" of the rollout of "1.1.0" has succeeded
    And the primary in clusters "c1,c2" runs version "1.1.0" by digest
    When "alice" approves wave 2 of the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And clusters "c3" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches: a launch that applies wave 2 once one of its two approvers
  # approved, or before any did, while the API lists c2 Pending.
  Scenario: A wave that needs two approvers starts once two distinct approvers approved it
    Given wave 2 needs the approvals of "alice,bob"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    When "alice" approves wave 2 of the rollout of "1.1.0"
    Then no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    When "bob" approves wave 2 of the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records the approvals of "alice,bob" for wave 2

  # Catches: a freeze window that holds only flotilla's word (c2 applied
  # while Pending), or that lets the wave start before the window ends
  # (the release is the window's end, 40 s after it began).
  Scenario: A freeze window holds a wave and releases it when it ends
    Given wave 2 is frozen for the next 40 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" waits for the freeze window "features-freeze"
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    And the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches: a frozen wave applied before the override (while the watch
  # shows it Pending); an override that releases nothing.
  Scenario: An override with a reason lets a wave start inside a freeze window
    Given wave 2 is frozen for the next 10 minutes
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" waits for the freeze window "features-freeze"
    And `flotilla get rollouts --watch` shows wave 2 of the rollout of "1.1.0" with cluster "c2" "Pending", waiting for the freeze window "features-freeze"
    When `flotilla override` is run for the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records an override of wave 2

  # Catches: a quarantine that lets c1's canary be promoted (a primary ran
  # 1.1.0) or touches c2; a rebuilt 1.1.0 recorded as skipped yet applied
  # to a cluster (the watch sees its digest).
  Scenario: A quarantined version is rolled back and never rolls out again
    Given the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the application's objects in clusters "c1,c2" are watched
    When version "1.1.0" is pushed
    And the canary in cluster "c1" waits for promotion
    And `flotilla quarantine` is run for version "1.1.0"
    Then the rollout of "1.1.0" is rolled back
    And no workload in any cluster runs version "1.1.0"
    And no primary in clusters "c1,c2" ran version "1.1.0" while watched
    And clusters "c2" are unchanged while watched
    When version "1.1.0" is built again and pushed
    Then flotilla records that "1.1.0" was skipped because "is quarantined"
    And no watched cluster takes version "1.1.0" for 5 seconds

  # Catches: a rollback that reverts every wave at once, or the oldest
  # first (c1's workload back on 1.0.0 before c2's primary); one that ends
  # RolledBack while a cluster still runs 1.1.0.
  Scenario: A succeeded rollout is rolled back: the whole fleet returns to the version before it
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And version "1.1.0" has been rolled out to every cluster
    And the application's objects in clusters "c1,c2" are watched
    When `flotilla rollback` is run for the rollout of "1.1.0"
    Then the rollback of "1.1.0" ends "RolledBack"
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
    And the workload in cluster "c1" came back to version "1.0.0" only after the primary in cluster "c2" did
