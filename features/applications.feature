Feature: "I pushed and nothing happened" is answered
  What flotilla last saw of each application (the version, what brought it:
  a webhook or a poll, when), the last push that started no rollout and why,
  and what last rolled out are kept in its state, in both modes, and shown
  where users look: `flotilla get applications`, `flotilla describe
  application`, the API (and the web UI's application page, ui.feature).
  Never only in the log.

  Background:
    Given a registry

  # Catches a skip kept only in the log or the journal (the CLI and the API
  # say nothing), one that loses its reason or what brought the push, and a
  # status that does not say what the fleet runs and which rollout brought
  # it. In scale-out mode the status is in NATS KV, read by any replica.
  @both-modes
  Scenario: A push outside the application's track: `flotilla get applications` and the API say it was skipped and why
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "2.0.0" is pushed
    Then flotilla records that "2.0.0" was skipped because "track MinorVersion"
    And no rollout of "2.0.0" was started
    And `flotilla get applications` says "podinfo" runs "1.0.0", last saw "2.0.0" from a "webhook" and skipped it because "track MinorVersion"
    And `flotilla describe application podinfo` says the last push skipped was "2.0.0", because "is a major upgrade of 1.0.0; track MinorVersion allows minor and patch upgrades only"
    And the API says "podinfo" skipped "2.0.0" from a "webhook" because "track MinorVersion", the fleet running "1.0.0" from its rollout
    And the primary in every cluster runs version "1.0.0" by digest

  # Catches a rejection kept only in the journal (image.rejected) and not
  # in the application's state, and one that does not say why.
  Scenario: An unsigned push: `flotilla get applications` and the API say it was rejected and why
    Given the application accepts only images signed with the key "release"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed with the key "release" is pushed
    Then the rollout of "1.1.0" succeeds
    When version "1.2.0" is pushed
    Then the push of "1.2.0" is rejected saying "is not signed"
    And `flotilla get applications` says "podinfo" runs "1.1.0", last saw "1.2.0" from a "webhook" and rejected it because "is not signed"
    And the API says "podinfo" rejected "1.2.0" from a "webhook" because "is not signed", the fleet running "1.1.0" from its rollout
    And no workload in any cluster runs version "1.2.0"
