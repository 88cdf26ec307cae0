Feature: Single sign-on: people log in through the OpenID provider, and their groups' roles decide what they see and steer
  flotilla's server.sso names an OpenID provider: the web UI logs a person
  in through it (authorization code flow with PKCE, a session kept by
  flotilla's state), the CLI with the device flow (`flotilla login --sso`,
  the refresh token kept in the CLI's config file). The person's name (the
  ID token's email) and groups (its groups claim) are who the audit names
  and what the projects' roles grant. The provider is a real one, started
  by the test kit (pkg/testkit/oidcop, zitadel's OP): discovery, signed ID
  tokens, JWKS, its own login pages, filled in headless Chromium.

  Background:
    Given a registry
    And an OpenID provider where "alice@example.com" is in group "release-managers" and "bob@example.com" in group "payments-viewers"
    And the application "podinfo" is in project "payments", where group "payments-viewers" is a viewer and group "release-managers" an approver

  # Catches: a callback that takes the provider's redirect without
  # verifying the ID token or drops its groups (bob would see nothing, or
  # everything), an SSO session that the API does not scope to the
  # person's projects (ledger listed), a UI that shows a control the role
  # lacks, and an API that lets the session roll back anyway (the
  # primaries would leave 1.0.0).
  Scenario: A person logs in to the web UI through the provider, sees only their project's applications, and has no control their role lacks
    Given a second application "ledger" that tracks "demo/ledger" in the same waves
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When "bob@example.com" logs in to the web UI through the OpenID provider
    Then the web UI names "bob@example.com" as who is logged in, and its session cookie is HttpOnly and SameSite=Lax
    And the fleet map of the web UI shows each cluster running "1.0.0" of "podinfo" as its primary does, reachable with Flagger ready
    And the web UI's session reads the application "podinfo" and not "ledger", which the automation's token reads
    And the web UI's rollout of "1.0.0" offers "bob@example.com" no control, saying the roles grant none in project "payments"
    And rolling back the rollout of "1.0.0" with the web UI's session is refused with 403 naming the rollback permission
    And the primary in every cluster runs version "1.0.0" by digest

  # Catches: a device flow that does not wait for the person (no token, or
  # someone else's), a CLI that does not send the kept ID token (the
  # approval refused 401) or that the server does not verify against the
  # provider with the CLI's client as audience, an approval recorded under
  # a token's name instead of the person's, and a wave released before
  # the approval (c2 changed before it) or not at all.
  Scenario: `flotilla login --sso` with the device flow, then `flotilla approve` as that person releases the wave
    Given wave 2 needs one approval
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When "alice@example.com" runs `flotilla login --sso` and approves its code at the OpenID provider
    Then `flotilla login --sso` says it logged in as "alice@example.com", keeping a refresh token in a file only its owner reads
    When version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    When `flotilla approve --wave 2` is run for the rollout of "1.1.0" without a token, as the person logged in
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records the approvals of "alice@example.com" for wave 2
    And `flotilla get audit` lists the approval of wave 2 by "alice@example.com"

  # Catches: a 401 that, with single sign-on on, tells a person only to
  # send an API token, which people do not hold (the hint dropped from the
  # API's reads, its watch stream, its controls, or the CLI's message), and
  # a login page that does not offer the provider, or whose button does not
  # lead to the provider's login.
  Scenario: Without credentials, flotilla's 401s tell a person to log in through single sign-on
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    Then without credentials flotilla's API, its watch stream and its controls answer 401, saying "or log in through single sign-on: flotilla login --sso, or /auth/login in a browser"
    And `flotilla get rollouts` without a token or a login fails, saying "or log in through single sign-on: flotilla login --sso, or /auth/login in a browser"
    When the web UI is opened in a browser without logging in
    Then the web UI shows its login form offering "Log in with SSO", which leads to the OpenID provider's login form

  # Catches: a sweep that never runs, or only at start (bob's ended
  # session would stay in the state), one that deletes live sessions
  # (bob's gone before he logs out), sessions kept in one replica's memory
  # rather than the state every replica reads (none in the bucket), and
  # server.sessionSweepInterval accepted and ignored (the default ten
  # minutes would outlast the wait).
  @scale-out
  Scenario: The periodic sweep deletes ended single sign-on sessions from the state, and keeps live ones
    Given web sessions are swept from the state every second
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When "bob@example.com" logs in to the web UI through the OpenID provider
    Then the state holds a live single sign-on session of "bob@example.com" 3 seconds later
    When "bob@example.com" logs out of the web UI
    Then within 5 seconds the state holds no single sign-on session of "bob@example.com"
