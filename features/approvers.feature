Feature: Approvers are people, with separation of duties
  A wave's approvals name who may approve it and how many distinct people
  must: `approvals: {required: 2, from: [group:release-managers],
  separationOfDuties: true}`. An approval counts only from a principal that
  is not automation (server.apiToken's "default", apiTokens[].automation),
  that `from` names (by a group of its, or as a user), and, with separation
  of duties, that did not push the version: none of its names is the
  rollout's pushedBy, as the registry's or git host's webhook names the
  pusher. A person signed in through the OpenID provider is known by the
  ID token's email, its username (server.sso.usernameClaim, default
  preferred_username) and its subject. A refused approval is answered 403
  with why, audited as refused, and changes nothing.

  # Catches: an approval counted from an automation token (robot is in the
  # group; "default" is automation always) or from the pusher (alice, named
  # by the registry's own notification as its actor), which would release
  # wave 2 after bob's approval: c2 changed before carol's; a wave started
  # after one approval of two; a pusher not carried from the registry's
  # notification to the rollout; a refusal not audited, or audited as
  # allowed; a gate that does not say how many more approvals it needs
  # from whom.
  Scenario: A wave needing two release managers: automation and the pusher do not count, two others start it
    Given a registry that requires a login and notifies flotilla itself
    And flotilla reads it with a Docker config file holding the login of "deployer"
    And the API tokens "alice,bob,carol" are people in group "release-managers"
    And the API token "robot" is automation in group "release-managers"
    And wave 2 needs 2 approvals from group "release-managers" with separation of duties
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When "alice" pushes version "1.1.0" to the registry
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And the rollout of "1.1.0" was pushed by "alice", as the API and `flotilla describe rollout` say
    When "robot" approves wave 2 of the rollout of "1.1.0" and is refused: "robot is automation and never counts as an approver"
    And "default" approves wave 2 of the rollout of "1.1.0" and is refused: "default is automation and never counts as an approver"
    And "alice" approves wave 2 of the rollout of "1.1.0" and is refused: "alice pushed 1.1.0 and may not approve its rollout (separationOfDuties)"
    And "bob" approves wave 2 of the rollout of "1.1.0" with the reason "CAB-9"
    Then no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    And the rollout of "1.1.0" waits: "wave 2 (wave-2) waits for 2 approvals, has 1 (bob): needs 1 more approval from group:release-managers"
    When "carol" approves wave 2 of the rollout of "1.1.0" with the reason "CAB-9", which releases it
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records the approvals of "bob,carol" for wave 2
    And `flotilla get audit` lists, newest first, at the times they were sent:
      | name    | action  | application | wave | reason | decision | from      |
      | carol   | approve | podinfo     | 2    | CAB-9  | allowed  | 127.0.0.1 |
      | bob     | approve | podinfo     | 2    | CAB-9  | allowed  | 127.0.0.1 |
      | alice   | approve | podinfo     | 2    |        | refused  | 127.0.0.1 |
      | default | approve | podinfo     | 2    |        | refused  | 127.0.0.1 |
      | robot   | approve | podinfo     | 2    |        | refused  | 127.0.0.1 |
    And `flotilla get audit -o json` gives the reasons of the refusals:
      | name    | why                                                                    |
      | alice   | alice pushed 1.1.0 and may not approve its rollout (separationOfDuties) |
      | default | default is automation and never counts as an approver                  |
      | robot   | robot is automation and never counts as an approver                    |

  # Catches: a cluster's manual verdict (`flotilla approve ROLLOUT
  # --cluster C`, Flagger's confirm-promotion gate) not held to its wave's
  # approvals: robot's (automation) or ci's (it pushed 1.1.0: the
  # registry's notification names its actor) would open c2's gate, and the
  # canary there would leave WaitingPromotion before carol's verdict; the
  # rule applied to a wave that asks for no approval (robot's verdict on c1
  # refused: c1 would never be promoted); a refusal not audited with its
  # cluster and verdict, or audited as allowed.
  Scenario: A manual verdict on a cluster of a wave that needs a release manager is held to the wave's approvals
    Given a registry
    And the API tokens "ci,carol" are people in group "release-managers"
    And the API token "robot" is automation in group "release-managers"
    And wave 2 needs 1 approval from group "release-managers" with separation of duties
    And the application will be validated manually
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    And "carol" approves wave 2 of the rollout of "1.0.0" with the reason "CAB-10", which releases it
    Then the rollout of "1.0.0" succeeds
    When version "1.1.0" is pushed
    Then the canary in cluster "c1" waits for promotion
    When "robot" approves the canary in cluster "c1" of the rollout of "1.1.0"
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    When "carol" approves wave 2 of the rollout of "1.1.0" with the reason "CAB-11", which releases it
    Then the canary in cluster "c2" waits for promotion
    When "robot" approves the canary in cluster "c2" of the rollout of "1.1.0" and is refused: "robot is automation and never counts as an approver"
    And "ci" approves the canary in cluster "c2" of the rollout of "1.1.0" and is refused: "ci pushed 1.1.0 and may not approve its rollout (separationOfDuties)"
    Then the canary in cluster "c2" still waits for promotion 10 seconds later, its primary running "1.0.0"
    When "carol" approves the canary in cluster "c2" of the rollout of "1.1.0"
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And `flotilla get audit -o json` lists the manual verdicts, newest first:
      | name  | cluster | detail | decision | why                                                                |
      | carol | c2      | valid  | allowed  |                                                                    |
      | ci    | c2      | valid  | refused  | ci pushed 1.1.0 and may not approve its rollout (separationOfDuties) |
      | robot | c2      | valid  | refused  | robot is automation and never counts as an approver                |
      | robot | c1      | valid  | allowed  |                                                                    |

  # Catches: separation of duties comparing the pusher with a signed-in
  # person's email and subject only (at Keycloak, Okta and Google the sub
  # is opaque and the email is not the registry's login): alice's own
  # approval would count, wave 2 would start and c2 would leave its first
  # image before bob's approval; a username not read from the ID token's
  # preferred_username (server.sso.usernameClaim's default) or not kept
  # by the CLI's bearer token path; a refusal answered other than 403,
  # not audited, or audited without the username it was decided by; a
  # refusal of alice that also refuses bob (the wave never starts).
  Scenario: A person signed in through the provider may not approve the version they pushed as their registry login, though the provider names them by an opaque subject and their email
    Given a registry that requires a login and notifies flotilla itself
    And flotilla reads it with a Docker config file holding the login of "deployer"
    And an OpenID provider where "alice@example.com" is in group "release-managers" and "bob@example.com" in group "release-managers"
    And the application "podinfo" is in project "payments", where group "payments-viewers" is a viewer and group "release-managers" an approver
    And wave 2 needs 1 approval from group "release-managers" with separation of duties
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the application's objects in clusters "c2" are watched
    When "alice" pushes version "1.1.0" to the registry
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And the rollout of "1.1.0" was pushed by "alice", as the API and `flotilla describe rollout` say
    When "alice@example.com" runs `flotilla login --sso` and approves its code on the OpenID provider's device form
    Then the ID token `flotilla login --sso` keeps names "alice@example.com" by an opaque subject, with the preferred_username "alice"
    When "alice@example.com" approves wave 2 of the rollout of "1.1.0" with the ID token `flotilla login --sso` keeps, and is refused 403: "alice@example.com is alice, who pushed 1.1.0, and may not approve its rollout (separationOfDuties)"
    Then no cluster of wave 2 of the rollout of "1.1.0" starts for 5 seconds
    And the workload "podinfo" in clusters "c2" still runs its first image
    When "bob@example.com" runs `flotilla login --sso` and approves its code on the OpenID provider's device form
    And `flotilla approve --wave 2` is run for the rollout of "1.1.0" without a token, as the person logged in
    Then the rollout of "1.1.0" succeeds
    And clusters "c2" were unchanged until the release
    And the primary in every cluster runs version "1.1.0" by digest
    And the rollout of "1.1.0" records the approvals of "bob@example.com" for wave 2
    And `flotilla get audit -o json` gives the reasons of the refusals:
      | name              | why                                                                                                |
      | alice@example.com | alice@example.com is alice, who pushed 1.1.0, and may not approve its rollout (separationOfDuties) |
    And `flotilla get audit -o json` records the refusal of "alice@example.com" with the username "alice"
