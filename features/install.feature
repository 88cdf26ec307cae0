Feature: Installing and checking flotilla where platform teams run it
  `flotilla config check` validates a configuration without serving, as a
  CI pipeline or the Helm chart's init container runs it: every problem
  with the path of its field, exit code 1. With --live it reaches each
  cluster of the fleet and checks that it serves Flagger's Canary.

  Scenario: flotilla config check validates a configuration and reaches the fleet
    Given a registry
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    Then `flotilla config check --live` reports the configuration valid and clusters "c1,c2" ready
    And `flotilla config check --live` of the configuration with a cluster "c9" whose API server does not answer fails naming it
    And `flotilla config check` of the configuration with a wave naming cluster "c42" the fleet lacks fails with the field's path
