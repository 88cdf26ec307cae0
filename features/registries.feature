Feature: A registry that requires a login
  A private registry (Debian's docker-registry with htpasswd users) sends its own
  push notifications to flotilla; flotilla reads the tag's digest there with the
  credentials of a Docker config file, as a kubernetes.io/dockerconfigjson Secret
  mounted into its pod holds them, and rolls that digest out through the waves.

  Background:
    Given a registry that requires a login and notifies flotilla itself
    And flotilla reads it with a Docker config file holding the login of "deployer"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves

  Scenario: A version pushed to the private registry rolls out with flotilla's login
    When "ci" pushes version "1.1.0" to the registry
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: Rotated credentials are read without a restart
    Given flotilla's Docker config file holds a wrong password for "deployer"
    When "ci" pushes version "1.1.0" to the registry
    Then the registry refused flotilla's login as "deployer" to read "1.1.0"
    And flotilla reports that the registry refused "1.1.0": "UNAUTHORIZED"
    And no workload in any cluster runs version "1.1.0"
    When the Docker config file is rotated to the password of "deployer"
    And "ci" pushes version "1.2.0" to the registry
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest
