Feature: Tokens: the admin creates API tokens that grant a role, and revokes them
  `flotilla token create NAME --project P --role R --expires 30d` makes an
  API token that grants role R in project P; flotilla keeps only its
  SHA-256, and prints the secret once. `flotilla token list` lists it
  (never its secret), `flotilla token revoke NAME` revokes it, and every
  replica refuses it at once: each reads the tokens through a watched cache
  (the NATS KV's watch in scale-out mode).

  Background:
    Given a registry

  # Catches: a created token that does not authenticate, or that may do
  # more than its role (a viewer stopping the line: the clusters would
  # then never take 1.1.0); a secret kept or listed in clear; a revocation
  # that another replica does not see at once (a cache not watched, or
  # read at start only), or a revoked token still taken.
  @both-modes
  Scenario: A token the admin creates works with its role's permissions, and is refused at once once revoked
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When the admin runs `flotilla token create ci-viewer --project default --role viewer --expires 30d`
    Then it printed the secret of "ci-viewer" once, and `flotilla token list` lists "ci-viewer" as "viewer in default" created by "default" expiring in 30 days, without its secret
    And on every replica the token "ci-viewer" reads the rollouts and is named "ci-viewer" by whoami
    And on every replica the token "ci-viewer" stopping the fleet is refused with 403 "ci-viewer may not stop-line"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    When the admin runs `flotilla token revoke ci-viewer`
    Then on every replica the token "ci-viewer" is refused with 401 "API token ci-viewer is revoked" within 1 second

  # Catches: an operator's token allowed to quarantine a version (the
  # built-in operator role lacks quarantine: the quarantine would have
  # made flotilla skip 1.1.0, and the clusters would never run it) or to
  # override a freeze window (it lacks override: each is a permission of
  # its own, #31 item 4), and a refusal that does not name the token and
  # the permission.
  Scenario: An operator's token may neither quarantine a version nor override a freeze window
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When the admin runs `flotilla token create ci-operator --project default --role operator --expires 1d`
    Then on every replica the token "ci-operator" quarantining a version of "podinfo" is refused with 403 "ci-operator may not quarantine"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And on every replica the token "ci-operator" overriding the freeze window of the rollout of "1.1.0" is refused with 403 "ci-operator may not override"

  # Catches: a token created with --automation whose principal is not
  # automation (its approval would count: c2 would change within the
  # hold), a flag the CLI accepts and does not send, and a refusal that
  # does not say why.
  Scenario: A token the admin creates as automation never counts as an approver
    Given wave 2 needs one approval
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When the admin runs `flotilla token create release-bot --project default --role approver --automation`
    And version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    When "release-bot" approves wave 2 of the rollout of "1.1.0" and is refused: "release-bot is automation and never counts as an approver"
    Then no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    And the rollout of "1.1.0" waits: "wave 2 (wave-2) waits for 1 approval, has none"

  # Catches: a created token that cannot log in to the web UI (its
  # session signed with a secret flotilla does not keep: the login form
  # would say "unknown API token"), a session another replica cannot read
  # (kept in one replica's memory), and a revoked token's session that
  # still opens the pages (its token not checked at each request).
  @both-modes
  Scenario: A token the admin creates logs in to the web UI, and its session ends when it is revoked
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the admin runs `flotilla token create ci-viewer --project default --role viewer --expires 30d`
    And "ci-viewer" logs in to the web UI with the token the admin created
    Then the web UI lists the rollout of "1.0.0" and names "ci-viewer" as who is logged in
    When the admin runs `flotilla token revoke ci-viewer`
    Then the web UI, opened again, shows its login form saying the session is no longer valid

  # Catches: a sweep of single sign-on sessions only (ci-viewer's would
  # stay in the state once its token is revoked, and ci-short's once it
  # expired: refused already, but kept for good), one that deletes the
  # session of a live token (gone before the revocation or the expiry),
  # sessions kept in one replica's memory rather than the state every
  # replica reads (none in the bucket), and server.sessionSweepInterval
  # accepted and ignored (the default ten minutes would outlast the waits).
  @scale-out
  Scenario: The periodic sweep deletes the web sessions of a created token once it is revoked or expired, and keeps live ones
    Given web sessions are swept from the state every second
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When the admin runs `flotilla token create ci-viewer --project default --role viewer --expires 30d`
    And "ci-viewer" logs in to the web UI with the token the admin created
    Then the state holds a live web session of the token "ci-viewer" 3 seconds later
    When the admin runs `flotilla token revoke ci-viewer`
    Then within 5 seconds the state holds no web session of the token "ci-viewer"
    When the admin runs `flotilla token create ci-short --project default --role viewer --expires 30s`
    And "ci-short" logs in to the web UI with the token the admin created
    Then the state holds a live web session of the token "ci-short" 3 seconds later
    And within 40 seconds the state holds no web session of the token "ci-short", once it expired
