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

  # Catches: a role that is not built in dropped or not granted to the
  # provider's group (carol could not pause: no Pause button, 403), one
  # that grants more than its permissions (an Abort or Roll back button, or
  # the API taking them: the rollout would end rolled back and the
  # primaries leave 1.1.0), a pause from the web UI that does not hold
  # wave 2 past wave 1's bake (c2 changed before carol resumed) or a
  # resume that releases nothing, and controls not recorded as carol's.
  Scenario: A custom role granted to a group: its person pauses and resumes a rollout from the web UI, and has no other control
    Given the OpenID provider also has "carol@example.com" in group "payments-oncall"
    And project "payments" grants group "payments-oncall" the custom role "pauser" with the permissions "read,pause,resume"
    And wave 1 bakes for 15 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the application's objects in clusters "c2" are watched
    When "carol@example.com" logs in to the web UI through the OpenID provider
    And version "1.1.0" is pushed
    Then the web UI's rollout of "1.1.0" offers "carol@example.com" only the control "Pause"
    When "carol@example.com" pauses the rollout of "1.1.0" in the web UI
    Then the web UI's rollout of "1.1.0" offers "carol@example.com" only the control "Resume"
    And aborting the rollout of "1.1.0" with the web UI's session is refused with 403 naming the abort permission
    And cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 25 seconds
    When "carol@example.com" resumes the rollout of "1.1.0" in the web UI
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the web UI's rollout of "1.1.0" offers "carol@example.com" no control, saying the roles grant none in project "payments"
    And rolling back the rollout of "1.1.0" with the web UI's session is refused with 403 naming the rollback permission
    And the workloads of every cluster stay unchanged for 15 seconds
    And the primary in every cluster runs version "1.1.0" by digest
    And the web UI's timeline of the rollout of "1.1.0" says "carol@example.com pause: allowed"
    And the web UI's timeline of the rollout of "1.1.0" says "carol@example.com abort: refused"

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

  # Catches: a browser login that takes a redirect without checking its
  # state (the forged redirect would log in, or end the login), that sends
  # no PKCE verifier or the wrong one (the provider refuses the code), that
  # keeps no refresh token or not where the device flow keeps it, a CLI
  # that sends its ID token once it has expired instead of refreshing it
  # first (whoami refused 401, the provider counting no refresh), and an
  # approval recorded under a token's name or released before it (c2
  # changed before the approval).
  Scenario: `flotilla login --sso --browser` through a loopback callback, the ID token refreshed once it expired, then `flotilla approve` as that person releases the wave
    Given the OpenID provider's ID tokens last 5 seconds
    And wave 2 needs one approval
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When "alice@example.com" runs `flotilla login --sso --browser` and logs in at the OpenID provider in Chromium
    Then `flotilla login --sso` says it logged in as "alice@example.com", keeping a refresh token in a file only its owner reads
    And a redirect to the login's callback with another state was refused while it waited
    When the ID token the CLI keeps has expired
    Then `flotilla whoami` without a token names "alice@example.com", username "alice", in group "release-managers", the CLI having refreshed its login at the OpenID provider
    When version "1.1.0" is pushed
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    When `flotilla approve --wave 2` is run for the rollout of "1.1.0" without a token, as the person logged in
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records the approvals of "alice@example.com" for wave 2

  # Catches: a web session that never asks the provider again (bob keeps
  # his old group's roles after the provider moved him, and keeps reading
  # after the provider revoked his login), a web client that asks no
  # offline_access (no refresh token to revoke), a refresh that does not
  # keep the rotated refresh token (the second refresh refused, 401), and a
  # refused refresh that leaves the session open or answers without the
  # login hint.
  Scenario: A web session whose ID token expired is refreshed at the provider: the person's new groups apply, and a revoked login ends the session with 401 and the login hint
    Given the OpenID provider's ID tokens last 4 seconds
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When "bob@example.com" logs in to the web UI through the OpenID provider
    And the web UI's page is left for a blank one, its session cookie kept
    Then the web UI's session names "bob@example.com" in group "payments-viewers", with no approve permission in project "payments"
    When the OpenID provider moves "bob@example.com" to group "release-managers"
    And the ID token of the web UI's session has expired
    Then the web UI's session names "bob@example.com" in group "release-managers", with the approve permission in project "payments"
    And the OpenID provider has refreshed the login of "bob" at least 1 time
    When the ID token of the web UI's session has expired
    Then the web UI's session names "bob@example.com" in group "release-managers", with the approve permission in project "payments"
    And the OpenID provider has refreshed the login of "bob" at least 2 times
    When the OpenID provider revokes the logins of "bob"
    And the ID token of the web UI's session has expired
    Then the web UI's session is refused 401 saying "the identity provider refused to refresh it; log in again at /ui/login"
    And the web UI's session is refused 401 again, saying "the single sign-on session has expired or ended: log in again at /ui/login"
    And the web UI, opened again, shows its login form

  # Catches: server.sso.offlineAccess accepted and ignored (the provider,
  # which refuses offline_access as Google does, would end the web login
  # and the CLI's device login with invalid_scope: no session, no login),
  # a web session that outlives its ID token when it holds no refresh
  # token (bob would still read after it expired, his groups and account
  # never checked again), and a refresh tried without a refresh token.
  Scenario: A provider that refuses offline_access: with server.sso.offlineAccess false people log in to the web UI and the CLI without a refresh token, and the web session ends with 401 and the login hint once its ID token expired
    Given the OpenID provider's ID tokens last 30 seconds
    And the OpenID provider refuses the scope "offline_access"
    And single sign-on asks no offline_access (server.sso.offlineAccess: false)
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When "bob@example.com" logs in to the web UI through the OpenID provider
    And the web UI's page is left for a blank one, its session cookie kept
    Then the web UI's session names "bob@example.com" in group "payments-viewers", with no approve permission in project "payments"
    And the OpenID provider holds no refresh token of "bob"
    When "alice@example.com" runs `flotilla login --sso` and approves its code on the OpenID provider's device form
    Then `flotilla login --sso` says it logged in as "alice@example.com", warning that the provider gave no refresh token, and keeps none
    When the ID token of the web UI's session has expired
    Then the web UI's session is refused 401 saying "the single sign-on session has expired or ended: log in again at /ui/login"
    And the OpenID provider answered no refresh of "bob"
    And the web UI, opened again, shows its login form

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
