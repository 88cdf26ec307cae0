Feature: No request can take flotilla down or lock a sender out
  flotilla's intake faces the internet. A delivery with a time no CloudEvent
  can carry, or a flood of requests with a wrong token, must neither stop the
  engine (now or after a restart) nor cost the real sender its deliveries.
  Flagger's token here has '/', '+' and '=' in it, as base64 secrets do.

  Background:
    Given a registry
    And the registry receiver takes 5 deliveries at once and 1 a second
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster

  Scenario Outline: A notification dated outside years 1-9999 rolls out, also after a restart
    When the registry notification of version "1.1.0" is dated "<time>"
    And flotilla is killed with SIGKILL
    And flotilla is started again
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

    Examples:
      | time                      |
      | 0000-01-01T00:00:00+01:00 |
      | 9999-12-31T23:59:59-01:00 |

  Scenario: Requests with a wrong token do not spend the registry's deliveries
    When 30 registry notifications with a wrong token are delivered
    And version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds

  Scenario: A damaged journal keeps flotilla from starting until `flotilla store repair` keeps what is intact
    When flotilla is killed with SIGKILL
    And one byte of the first record of flotilla's journal is flipped
    Then `flotilla serve` refuses to start, naming the journal segment and `flotilla store repair`
    When `flotilla store repair` is run on flotilla's data directory
    And flotilla is started again
    And version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
