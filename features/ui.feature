Feature: The web UI: the fleet, live, in a browser
  flotilla serves a web UI at /ui/ from its own binary: the rollouts, one
  rollout as waves x clusters with its timeline, an application's history
  (which version each cluster ran, when, and each rollout's outcome) and
  status (the last push seen, the last skipped and why, a silent webhook),
  and the fleet as a map of clusters x applications coloured by version and
  state, with each cluster's health. A cluster that failed stands apart
  from those reverted because of it; one whose primary was changed by hand
  shows as drifted, in its own colour, and one being caught up or having
  its drift reverted says so. Pages stay live on the API's
  Server-Sent Events. A person logs in with an API token at the login page
  (the session is a cookie); the controls appear once logged in. These scenarios drive Debian's Chromium,
  headless. In a terminal, `flotilla describe rollout --watch` follows a
  rollout on the same stream until it ends.

  Background:
    Given a registry

  Scenario: The web UI shows a rollout moving through two waves, live
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the web UI is open in a browser
    When version "1.1.0" is pushed
    Then the web UI lists the rollout of "1.1.0" without a reload
    When the rollout of "1.1.0" is opened in the web UI
    Then the web UI shows wave 1 of the rollout of "1.1.0" rolling out while wave 2 waits, then every cluster "Succeeded", without a reload
    And the web UI's timeline of the rollout of "1.1.0" has its start, a cluster.succeeded for each cluster, then its end
    And the fleet map of the web UI shows each cluster running "1.1.0" of "podinfo" as its primary does, reachable with Flagger ready
    When the application page of "podinfo" is opened from the rollouts list
    Then the web UI's application page draws each cluster running "1.1.0" after "1.0.0", as its primary does

  @both-modes
  Scenario: The web UI shows why a rollout failed
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    And the web UI is open in a browser
    When version "1.1.0" is pushed
    Then `flotilla describe rollout --watch` follows the rollout of "1.1.0" live until it ends "RolledBack", exiting non-zero
    And the rollout of "1.1.0" is rolled back
    And the web UI shows the rollout of "1.1.0" "RolledBack", its reason naming cluster "c4"
    And the web UI's rollout of "1.1.0" shows cluster "c4" failed, apart from the clusters reverted because of it
    And the fleet map of the web UI shows cluster "c4" failed and the others of the rollout of "1.1.0" reverted
    When the application page of "podinfo" is opened from the fleet map
    Then the web UI's application page draws cluster "c4" failing "1.1.0" while the others ran it and were put back to "1.0.0", as their primaries run

  # Read anonymously (server.anonymousRead), the page offers no controls
  # but a link to log in; logged in with her API token, alice's approval
  # is recorded under her token's name.
  Scenario: The web UI's controls need a person logged in
    Given wave 2 needs the approvals of "alice"
    And flotilla lets anyone read without credentials (server.anonymousRead)
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the web UI is open in a browser
    When version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And the web UI shows the rollout of "1.1.0" without controls, offering to log in
    When "alice" logs in from the web UI's login link and opens the rollout of "1.1.0"
    And "Approve wave 2" is pressed in the web UI
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the approvals of "alice" for wave 2

  Scenario: The web UI's application page says why a push was skipped
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the web UI is open in a browser
    When the application page of "podinfo" is opened from the fleet map
    And version "2.0.0" is pushed
    Then the web UI's application page says "2.0.0" was skipped, the reason naming "track", brought by a webhook, without a reload

  Scenario: The web UI's fleet map shows a cluster flotilla cannot reach
    Given flotilla reaches cluster "c2" through a connection that can freeze
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the web UI is open in a browser
    When flotilla's connection to cluster "c2" freezes, as if its API server stopped
    Then the fleet map of the web UI shows cluster "c2" unreachable, and "c1" reachable with Flagger ready
    When flotilla's connection to cluster "c2" comes back
    Then the fleet map of the web UI shows each cluster running "1.0.0" of "podinfo" as its primary does, reachable with Flagger ready

  # Catches a map that draws a primary changed by hand as the version
  # flotilla last rolled out there (the rollouts say so, the cluster does
  # not), one that shows the drift only on the application's API, and one
  # that draws it in a version's colour. In scale-out mode the replica
  # that holds the application's partition finds the drift; the map is
  # read from whichever replica serves the page.
  @both-modes
  Scenario: The web UI's fleet map shows a primary changed by hand as drifted
    Given flotilla checks the clusters against the validated digest every "1m"
    And the application's drift policy is "report"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the web UI is open in a browser
    When the primary of "podinfo" in cluster "c2" is set by hand to its old version
    Then the fleet map of the web UI shows cluster "c2" drifted, running what its primary runs, in its own colour, and "c1" running "1.0.0" as its primary does

  # Catches a map that shows a revert of a drift as a version's rollout
  # (nothing says why 1.0.0 rolls out again), and one that keeps showing
  # the drift once the revert put the validated digest back.
  Scenario: The web UI's fleet map shows a drift being reverted
    Given flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the web UI is open in a browser
    And the fleet map is open in the web UI, noting each state its cells show
    When the primary of "podinfo" in cluster "c2" is set by hand to its old version
    Then a rollout of kind "drift-revert" of "1.0.0" to "c2" succeeds
    And the fleet map of the web UI shows cluster "c2" reverting its drift to "1.0.0", then running "1.0.0" as its primary does, without a reload
