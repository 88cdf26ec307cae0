Feature: Only signed images roll out
  An application can trust cosign public keys (or keyless identities under a
  trusted root): a digest without a signature they trust is rejected before
  it reaches a cluster. A wave with requireSignature: false takes unsigned
  builds; a rollout of one stops before the first wave that requires a
  signature.

  Background:
    Given a registry

  Scenario: A signed image rolls out; an unsigned one and one signed with another key are rejected
    Given the application accepts only images signed with the key "release"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed with the key "release" is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the signature of the key "release"
    And the primary in every cluster runs version "1.1.0" by digest
    When version "1.2.0" is pushed
    Then the push of "1.2.0" is rejected saying "is not signed"
    When version "1.3.0" signed with the key "mallory" is pushed
    Then the push of "1.3.0" is rejected saying "no signature of"
    And no workload in any cluster runs version "1.2.0"
    And no workload in any cluster runs version "1.3.0"

  Scenario: An image signed after it was pushed rolls out when its signature arrives
    cosign signs by digest, so CI pushes the image first: the registry's
    notification of the signature's tag is what rolls the version out.
    Given the application accepts only images signed with the key "release"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" signed with the key "release" is pushed
    Then the rollout of "1.0.0" succeeds
    When version "1.1.0" is pushed
    Then the push of "1.1.0" is rejected saying "is not signed"
    And no workload in any cluster runs version "1.1.0"
    When version "1.1.0" is signed afterwards with the key "release"
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the signature of the key "release"
    And the primary in every cluster runs version "1.1.0" by digest

  Scenario: An early wave takes an unsigned build; the wave that requires a signature takes it once signed
    Given the application accepts only images signed with the key "release"
    And wave 1 takes unsigned images
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" signed with the key "release" is pushed
    Then the rollout of "1.0.0" succeeds
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in clusters "c1" runs version "1.1.0" by digest
    And the primary in clusters "c2" runs version "1.0.0" by digest
    When version "1.1.0" is signed afterwards with the key "release"
    Then the rollout of "1.1.0" signed with the key "release" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
