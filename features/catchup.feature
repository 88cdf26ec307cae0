Feature: Catch-up and drift: the clusters held against the validated digest
  flotilla compares what each cluster of an application's waves runs with the
  digest the fleet last converged on, at start-up, every
  fleet.reconcile.interval and when a cluster's watch cache sees a primary
  change. A cluster that entered the waves, or came back empty, gets that digest
  through its wave's pipeline and analysis without a push (a rollout of kind
  catch-up); a primary changed by hand is drift: reported, and with
  driftPolicy: revert restored (a rollout of kind drift-revert).

  Background:
    Given a registry

  # Catches a flotilla that leaves a cluster added to a wave empty until the
  # next push, one that rolls the new cluster out without the wave's
  # pipeline (no canary, no primary), one that starts a second catch-up, and
  # one that touches the clusters that run the digest already.
  @both-modes
  Scenario: A cluster added to the last wave gets the validated digest without a push
    Given flotilla checks the clusters against the validated digest every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When flotilla is restarted with cluster "c4" added to the last wave
    Then a rollout of kind "catch-up" of "1.0.0" to "c4" succeeds
    And the primary in cluster "c4" runs version "1.0.0" by digest
    And the primary in every cluster runs version "1.0.0" by digest
    And `flotilla describe rollout` of that rollout says kind "catch-up"
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And after flotilla is restarted again and checks 3 more times, exactly 1 rollout of kind "catch-up" was started

  # Catches a flotilla that sees only clusters new in its config: c4 is in
  # it from the start, taken by the last wave's selector but not by the
  # application's (a cluster in no wave is an error in the config), and
  # enters the application's waves when its labels change. Also catches one
  # that catches up a cluster the application does not go to.
  @both-modes
  Scenario: A cluster whose labels now match gets the validated digest without a push
    Given flotilla checks the clusters against the validated digest every "2s"
    And clusters "c1,c2" are labelled "team=web"
    And clusters "c2" are labelled "ring=late"
    And wave 2 is the clusters labelled "ring=late"
    And the application goes only to clusters labelled "team=web"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    And flotilla is restarted with cluster "c4" labelled "ring=late,team=batch" in its config
    And in 6 seconds no rollout of kind "catch-up" was started
    When flotilla is restarted with cluster "c4" labelled "ring=late,team=web", which the application's waves now take
    Then a rollout of kind "catch-up" of "1.0.0" to "c4" succeeds
    And the primary in cluster "c4" runs version "1.0.0" by digest
    And the primary in every cluster runs version "1.0.0" by digest
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And `flotilla get rollouts` lists that rollout as kind "catch-up"

  # Catches a flotilla that sees only clusters new in its config: a cluster
  # whose canary (and with it Flagger's primary) is gone stays empty. The
  # interval is a minute: the watch caches see the canary go.
  Scenario: A cluster that comes back empty gets the validated digest without a push
    Given flotilla checks the clusters against the validated digest every "1m"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the canary of "podinfo" in cluster "c2" is deleted with its primary
    Then a rollout of kind "catch-up" of "1.0.0" to "c2" succeeds
    And the primary in cluster "c2" runs version "1.0.0" by digest
    And the primary in every cluster runs version "1.0.0" by digest

  # Catches a flotilla that never looks at the primaries (nothing reported), one
  # that looks only at its interval (a minute here: the watch caches' events
  # must find it within seconds), one that reports drift only in its log (no
  # event, no metric, nothing in the API), and one that reverts what the
  # policy says to report.
  Scenario: A primary's image changed by hand is reported as drift
    Given flotilla checks the clusters against the validated digest every "1m"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the primary of "podinfo" in cluster "c2" is set by hand to its old version
    Then flotilla journals the drift of cluster "c2" to its old version within 10 seconds
    And flotilla's metric says 1 cluster of "podinfo" drifted
    And the API's application "podinfo" names cluster "c2" drifted, running its old version
    And in 6 seconds no rollout of kind "drift-revert" was started
    And the primary in cluster "c2" still runs its old version

  # Catches a revert policy that only reports, one that reverts outside the
  # pipeline (no rollout, no analysis: Flagger would not promote it), one
  # that rolls out to every cluster rather than the drifted one, and one
  # that keeps saying "drifted" after the revert until its next check (a
  # minute here: the watch caches find the drift).
  @both-modes
  Scenario: A primary's image changed by hand is restored with driftPolicy: revert
    Given flotilla checks the clusters against the validated digest every "1m"
    And the application's drift policy is "revert"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the primary of "podinfo" in cluster "c2" is set by hand to its old version
    Then flotilla journals the drift of cluster "c2" to its old version
    And a rollout of kind "drift-revert" of "1.0.0" to "c2" succeeds
    And the API's application "podinfo" names no drifted cluster within 2 seconds
    And the primary in cluster "c2" runs version "1.0.0" by digest
    And the primary in every cluster runs version "1.0.0" by digest
    And the API says that rollout is of kind "drift-revert" and goes to "c2" only

  # Catches a flotilla that leaves a git application's new cluster empty
  # until the next push, one that catches it up with the first commit rather
  # than the last validated one (c4's values are unchanged since the first,
  # but the chart's are not), and one that starts a second catch-up.
  @both-modes
  Scenario: A cluster added to a git application's last wave gets the last validated commit without a push
    Given flotilla checks the clusters against the validated digest every "2s"
    And a deployments repository with the chart "podinfo" and values for clusters "c1,c2,c4"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    And a push changes "greeting" to "hej" in "charts/podinfo/values.yaml"
    And the rollout of that commit succeeds
    And the application's namespace exists in cluster "c4"
    When flotilla is restarted with cluster "c4" added to the last wave
    Then a rollout of kind "catch-up" of that commit to "c4" succeeds
    And the primary in cluster "c4" runs that commit, greeting "hej"
    And the primary and the workload in every cluster run that commit, greeting "hej"
    And the API says that rollout is of kind "catch-up" and goes to "c4" only
    And after flotilla is restarted again and checks 3 more times, exactly 1 rollout of kind "catch-up" was started

  # Catches a flotilla that does not compare a git application's primaries
  # (a git cluster reported current whatever it runs), one that compares
  # them with the image the repository names elsewhere than the validated
  # commit's render for the cluster, and one that reverts what the policy
  # says to report. The interval is a minute: the watch caches find it.
  Scenario: A git application's primary whose image was changed by hand is reported as drift
    Given flotilla checks the clusters against the validated digest every "1m"
    And a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When the primary of "podinfo" in cluster "c2" is set by hand to image "registry.example.com/podinfo:6.0.1"
    Then flotilla journals the drift of cluster "c2" to image "registry.example.com/podinfo:6.0.1" from the first commit within 10 seconds
    And flotilla's metric says 1 cluster of "podinfo" drifted
    And the API's application "podinfo" names cluster "c2" drifted, running image "registry.example.com/podinfo:6.0.1"
    And in 6 seconds no rollout of kind "drift-revert" was started
    And the primary in cluster "c2" still runs image "registry.example.com/podinfo:6.0.1"

  # Catches a revert that re-applies the commit without a new revision
  # (the workload unchanged: Flagger analyses nothing and the primary keeps
  # the hand's image), one outside the pipeline, and one that goes to every
  # cluster rather than the drifted one.
  @both-modes
  Scenario: A git application's primary changed by hand is restored with driftPolicy: revert
    Given flotilla checks the clusters against the validated digest every "2s"
    And the application's drift policy is "revert"
    And a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When the primary of "podinfo" in cluster "c2" is set by hand to image "registry.example.com/podinfo:6.0.1"
    Then flotilla journals the drift of cluster "c2" to image "registry.example.com/podinfo:6.0.1" from the first commit within 10 seconds
    And a rollout of kind "drift-revert" of the first commit to "c2" succeeds
    And the primary in cluster "c2" runs image "registry.example.com/podinfo:6.0.0"
    And the primary and the workload in every cluster run the first commit, greeting "hello"
    And the API says that rollout is of kind "drift-revert" and goes to "c2" only

  # Catches a flotilla that counts as running a git application's commit
  # only the clusters its push changed: c2, which the push to c1's values
  # did not change, runs what that commit renders for it, so its primary
  # changed by hand is drift (reported only), not a cluster new to the
  # waves caught up behind the policy's back.
  Scenario: A git application's cluster a push did not change still runs its commit: a change by hand there is drift
    Given flotilla checks the clusters against the validated digest every "2s"
    And a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    And a push changes "greeting" to "hej" in "clusters/c1/podinfo/values.yaml"
    And the rollout of that commit succeeds
    When the primary of "podinfo" in cluster "c2" is set by hand to image "registry.example.com/podinfo:6.0.1"
    Then flotilla journals the drift of cluster "c2" to image "registry.example.com/podinfo:6.0.1" from that commit within 10 seconds
    And in 6 seconds no rollout of kind "catch-up" was started
    And the primary in cluster "c2" still runs image "registry.example.com/podinfo:6.0.1"
