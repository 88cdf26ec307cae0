Feature: Authenticated by default: who reads and steers flotilla has an identity
  Every read of flotilla's API, its watch stream and every page of the web
  UI need an identity: an API token (server.apiToken, server.apiTokens)
  sent as `Authorization: Bearer`, or the web UI's session cookie, which a
  person gets by logging in with an API token at /ui/login. Without one
  the API answers 401 with WWW-Authenticate and says what to send, the web
  UI answers its login page. server.anonymousRead: true opens the reads
  (insecure); a control always needs a token. A control authenticated by
  the cookie must carry the X-Flotilla-CSRF header too, so that another
  site cannot make a logged-in browser send one. The health checks and
  /metrics stay open. The CLI sends --token or FLOTILLA_TOKEN with every
  call and, without one, says what to set.

  Background:
    Given a registry

  @both-modes
  Scenario: Without credentials the API, the watch stream and the web UI answer 401; the token reads them
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    Then without credentials flotilla's API, its watch stream and the web UI's pages answer 401, saying how to authenticate
    And without credentials /healthz, /readyz and /metrics answer
    And with the API token flotilla's API, its watch stream and the web UI's pages answer
    And stopping the fleet without credentials is refused with 401
    And stopping the fleet with an unknown API token is refused with 401
    And the fleet is still running, and no stop of the fleet was journaled
    And `flotilla get rollouts` without a token fails saying to set --token or FLOTILLA_TOKEN

  Scenario: With anonymousRead the reads are open, a control still needs a token
    Given flotilla lets anyone read without credentials (server.anonymousRead)
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    Then without credentials flotilla's API, its watch stream and the web UI's pages answer, the API listing the rollout of "1.0.0"
    And `flotilla get rollouts` without a token lists the rollout of "1.0.0"
    And stopping the fleet without credentials is refused with 401
    And the fleet is still running, and no stop of the fleet was journaled

  # In scale-out mode the replicas behind the scenario's address take the
  # requests in turn: the session one replica made is good on the others
  # (it is signed with the token, which every replica's config holds).
  @both-modes
  Scenario: A person logs in to the web UI with an API token, sees the rollouts and their name, and logs out
    Given an API token named "alice"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the web UI is opened in a browser without logging in
    Then the web UI shows its login form, asking for an API token, and no rollouts
    When "alice" logs in to the web UI with a wrong token
    Then the web UI says "unknown API token" on its login form
    When "alice" logs in to the web UI with her API token
    Then the web UI lists the rollout of "1.0.0" and names "alice" as who is logged in
    When "alice" logs out of the web UI
    Then the web UI shows its login form again, also when the rollouts page is opened again

  @both-modes
  Scenario: A control authenticated by the session cookie needs the X-Flotilla-CSRF header
    Given an API token named "alice"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When "alice" logs in at /ui/login with her API token, getting a session cookie
    Then with that cookie flotilla's API reads the rollouts and names "alice" as who asks, without the X-Flotilla-CSRF header
    And with that cookie and without the X-Flotilla-CSRF header stopping the fleet is refused with 403
    And the fleet is still running, and no stop of the fleet was journaled
    And with that cookie and the X-Flotilla-CSRF header stopping the fleet is recorded as done by "alice"
