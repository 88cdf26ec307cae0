Feature: Nothing missed: a poll of the registry behind the webhooks
  A registry push is acted on from its webhook; a webhook that never arrives
  (flotilla restarting, a sender that does not retry, a misconfigured hook) is
  caught by flotilla's own poll of the application's registry, which feeds what
  it finds into the same path as a webhook: verified, planned and deduplicated
  alike. The rollout says it was found by a poll. `flotilla refresh` polls now.

  Background:
    Given a registry

  # Catches a flotilla that acts on webhooks only (the push is never rolled
  # out), and one whose poll bypasses verify and plan (no rollout, or one
  # not marked source poll). In scale-out mode too: the replica holding the
  # partition of the image's pushes polls it. The alarm catches a poll that
  # quietly makes up for a broken webhook (no event, no gauge, nothing in
  # `flotilla get applications` or the API), one raised but never cleared
  # by the webhook's return, and, in scale-out mode, a gauge each replica
  # reports (a sum over them of 3).
  @both-modes
  Scenario: A push whose webhook is dropped rolls out within one poll interval, marked source: poll, and the silent-receiver alarm fires
    Given flotilla polls the applications' registries every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed without its registry notification
    Then the rollout of "1.1.0" starts within 10 seconds
    And the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And `flotilla describe rollout` of "1.1.0" says it came from a "poll"
    And the API says the rollout of "1.1.0" came from a "poll"
    And flotilla counted the version found by polling
    And the silent-receiver alarm fires for "podinfo": "1.1.0" found by a poll, the last webhook having brought "1.0.0"
    When version "1.2.0" is pushed
    Then the rollout of "1.2.0" succeeds
    And the silent-receiver alarm of "podinfo" is cleared, the last webhook having brought "1.2.0"

  # Catches a poll that feeds a version the webhook brought again (a second
  # rollout, or a superseded one).
  # Catches a poll that leaves track Newest out, and one that takes the
  # lexically last tag (build-z, built before what runs: plan skips it and
  # build-c never rolls out) instead of the most recently built.
  Scenario: On track Newest, builds pushed without their webhooks: the most recently built rolls out
    Given flotilla polls the applications' registries every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "Newest" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "build-b" built 10 minutes ago is pushed
    Then the rollout of "build-b" succeeds
    When version "build-z" built 20 minutes ago is pushed without its registry notification
    And version "build-c" built 1 minutes ago is pushed without its registry notification
    Then the rollout of "build-c" starts within 10 seconds
    And the rollout of "build-c" succeeds
    And the primary in every cluster runs version "build-c" by digest
    And `flotilla describe rollout` of "build-c" says it came from a "poll"
    And no rollout of "build-z" was started

  # Catches a poll that compares tags only: 1.0.0 rebuilt and pushed again
  # without its webhook is the deployed tag, but not the deployed digest (the
  # webhook's push of it rolls out: versions.feature); and one that feeds
  # the new digest in at every poll (a second rollout of it).
  Scenario: A version rebuilt and pushed again without its webhook: the poll rolls out its new digest
    Given flotilla polls the applications' registries every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.0.0" is built again and pushed without its registry notification
    Then the rollout of the rebuilt "1.0.0" starts within 10 seconds, from a "poll"
    And the primary in every cluster comes to run the rebuilt "1.0.0" by digest
    And flotilla has polled the registry 3 more times and found nothing new
    And exactly 1 rollout of the rebuilt "1.0.0" was started

  Scenario: A push with its webhook and a poll that sees the same version: exactly one rollout
    Given flotilla polls the applications' registries every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And flotilla has polled the registry 3 more times and found nothing new
    And exactly 1 rollout of "1.1.0" was started

  # Catches a refresh that does not poll, or does not feed what it finds in.
  Scenario: `flotilla refresh podinfo` finds a version pushed without its webhook
    Given flotilla polls the applications' registries every "0s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed without its registry notification
    And `flotilla refresh podinfo` is run
    Then it answers that it found version "1.1.0" and fed it in
    And the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And the API says the rollout of "1.1.0" came from a "poll"

  # Catches a poll of image applications only: a git host's push lost
  # (GitHub does not retry) is never rolled out.
  Scenario: A git push whose webhook is dropped rolls out within one poll interval, marked source: poll
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla polls the applications' registries every "2s"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When a push without its webhook changes "greeting" to "hej" in "clusters/c1/podinfo/values.yaml"
    Then the rollout of that commit succeeds
    And the primary in cluster "c1" runs that commit, greeting "hej"
    And the primary in cluster "c2" runs the first commit, greeting "hello"
    And the API says the rollout of that commit came from a "poll"

  # Catches a poll that waits a whole interval after a start, and one that
  # feeds every version it finds rather than the newest.
  Scenario: flotilla down while two versions are pushed: after it starts, the newest rolls out, once
    Given flotilla polls the applications' registries every "2s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When flotilla is killed with SIGKILL
    And version "1.1.0" is pushed without its registry notification
    And version "1.2.0" is pushed without its registry notification
    And flotilla is started again
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest
    And exactly 1 rollout of "1.2.0" was started
    And no rollout of "1.1.0" was started

  # Catches a poll that hammers a failing registry (no backoff: 12 failures
  # in 12 s at an interval of 1s; doubled up to 8x, 1 or 2 once it settled), that hides
  # its failure, that rolls something out without the registry's answer, or
  # that stays stuck once the registry is back.
  Scenario: A registry whose tag list fails while polled: backoff, a visible error, no rollout, nothing stuck
    Given the registry's tag list answers 503
    And flotilla polls the applications' registries every "1s"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed without its registry notification
    Then flotilla's failed polls back off: between 1 and 4 in 12 seconds
    And `flotilla refresh podinfo` fails with 502, naming the registry's answer
    And no rollout of "1.1.0" was started
    When the registry's tag list answers again
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
