Feature: Only signed images roll out
  An application can trust cosign public keys (or keyless identities under a
  trusted root): a digest without a signature they trust is rejected before
  it reaches a cluster. A wave with requireSignature: false takes unsigned
  builds; a rollout of one stops before the first wave that requires a
  signature.

  Every signature here is made by the real cosign CLI (cosign v3, built
  from the module proxy): `cosign generate-key-pair`, `cosign sign --key`,
  logged in a Rekor stand-in (Rekor's v1 API on sigstore-go's
  VirtualSigstore) whose trusted_root.json the key's policy names, and
  keyless `cosign sign --fulcio-url --rekor-url --identity-token` with a
  Fulcio stand-in certifying the ID tokens of a real OpenID provider.

  Background:
    Given a registry

  # Catches a verifier that takes an unsigned digest, or any signature
  # whatever its key (cosign's default format: a bundle among the referrers).
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

  # Catches a verifier that never looks again at a digest it refused once.
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

  # Catches a plan that sends an unsigned build past the waves that take it.
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

  # Catches a verifier that takes another key's signature; one that takes a
  # key's signature with no transparency-log entry (cosign's
  # --insecure-ignore-tlog, silently: the default policy requires the
  # entry); and one that checks that an entry is there but not the log's
  # signature over it (the tampered bundle: its entry's integrated time
  # rewritten). The .sig tag's Rekor bundle annotation is checked too.
  Scenario: cosign's logged signature rolls out; another key's, an unlogged one and a tampered bundle are refused, each saying why
    Given the application accepts only images signed with the key "release"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed with the key "release" in the .sig tag is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the signature of the key "release"
    And the primary in every cluster runs version "1.1.0" by digest
    When version "1.2.0" signed with the key "mallory" is pushed
    Then the push of "1.2.0" is rejected saying "key release: "
    When version "1.3.0" signed with the key "release" without a transparency-log entry is pushed
    Then the push of "1.3.0" is rejected saying "no transparency-log entry"
    When version "1.4.0" signed with the key "release" in a tampered bundle is pushed
    Then the push of "1.4.0" is rejected saying "not enough verified log entries"
    And the workloads of every cluster stay unchanged for 10 seconds
    And the primary in every cluster runs version "1.1.0" by digest
    And no workload in any cluster runs version "1.2.0"
    And no workload in any cluster runs version "1.3.0"
    And no workload in any cluster runs version "1.4.0"

  # Catches a policy whose ignoreTlog is not applied (the unlogged signature
  # refused), or applied silently (the rollout does not say that the log
  # was not checked), and one under which ignoreTlog takes any key. Under
  # the default policy the same kind of signature (cosign's bundle made
  # with a signing config naming no log) is refused saying "no
  # transparency-log entry" (the scenario above).
  Scenario: With ignoreTlog a key's unlogged signature rolls out, the rollout saying the log was not checked
    Given the application accepts only images signed with the key "release", ignoring the transparency log
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed with the key "release" without a transparency-log entry is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the signature of the key "release", its transparency log not checked
    And the primary in every cluster runs version "1.1.0" by digest
    When version "1.2.0" signed with the key "mallory" without a transparency-log entry is pushed
    Then the push of "1.2.0" is rejected saying "key release: "
    And the workloads of every cluster stay unchanged for 10 seconds
    And the primary in every cluster runs version "1.1.0" by digest
    And no workload in any cluster runs version "1.2.0"

  # Keyless, as a CI job signs: an ID token of a real OpenID provider
  # (oidcop, the SSO scenarios' provider), `cosign sign --fulcio-url
  # --rekor-url --identity-token` (an ephemeral key, a certificate from a
  # Fulcio stand-in answering Fulcio's v2 API, the signature logged in the
  # Rekor stand-in), flotilla trusting the issuer and the e-mail under the
  # trusted root naming that Fulcio's CA and that log.
  # Catches a keyless verifier that takes any certificate its root's CA
  # issued, whoever the token named (1.2.0 would roll out), one that
  # refuses without naming who signed, and one that never reads cosign's
  # keyless bundles (a certificate, a logged DSSE statement: 1.1.0 would be
  # refused).
  Scenario: An image cosign signed keylessly as the trusted identity rolls out; one signed as another identity is refused, naming it
    Given an OpenID provider where "release-bot@example.com" and "mallory@example.com" log in, and a Fulcio trusting its tokens
    And the application accepts only images signed keylessly by "release-bot@example.com" of that provider
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed keylessly by "release-bot@example.com" is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records the keyless signature of "release-bot@example.com"
    And the primary in every cluster runs version "1.1.0" by digest
    When version "1.2.0" signed keylessly by "mallory@example.com" is pushed
    Then the push of "1.2.0" is rejected saying "signed by mallory@example.com"
    And the workloads of every cluster stay unchanged for 10 seconds
    And the primary in every cluster runs version "1.1.0" by digest
    And no workload in any cluster runs version "1.2.0"
    And Fulcio certified "release-bot@example.com" then "mallory@example.com", and the Rekor log holds 2 entries

  # Catches a policy whose attestations are not required (1.2.0, signed and
  # not attested, would roll out), one that takes an attestation by a key it
  # does not trust (1.3.0), and one that does not read cosign's attestation
  # bundles (1.1.0 would be refused).
  Scenario: An application requiring SLSA provenance rolls out a signed and attested image; one not attested, or attested by another key, is refused
    Given the application accepts only images signed with the key "release" and attested by it with "https://slsa.dev/provenance/v1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" signed with the key "release" and attested with "slsaprovenance1" by the key "release" is pushed
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" records "key release; https://slsa.dev/provenance/v1 attested by key release" as its signer
    And the primary in every cluster runs version "1.1.0" by digest
    When version "1.2.0" signed with the key "release" is pushed
    Then the push of "1.2.0" is rejected saying "carries no attestation of type https://slsa.dev/provenance/v1 by a trusted signer"
    When version "1.3.0" signed with the key "release" and attested with "slsaprovenance1" by the key "mallory" is pushed
    Then the push of "1.3.0" is rejected saying "carries no attestation of type https://slsa.dev/provenance/v1 by a trusted signer (referrer"
    And the workloads of every cluster stay unchanged for 10 seconds
    And the primary in every cluster runs version "1.1.0" by digest
    And no workload in any cluster runs version "1.2.0"
    And no workload in any cluster runs version "1.3.0"
