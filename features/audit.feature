Feature: Audit: every control is recorded with who sent it, when, from where and why
  Every control sent through flotilla's API (approve, retry, pause, resume,
  abort, override, rollback, quarantine, refresh, fleet stop and start) is
  journaled with an audit record beside the control's own event: who (the
  token's or person's name, their groups, how they proved it), from where
  (the client's address; the first X-Forwarded-For hop only when
  server.trustedProxies lists the proxy it came through), with which
  client, the action (the permission it needs), the application, rollout
  and wave, the reason given, and the decision (allowed, or refused and
  why). `flotilla get audit` lists the records newest first; the rollout's
  timeline (the API's and the web UI's) shows them among its events.

  Background:
    Given a registry

  # Catches: a control journaled without its record, or a record without
  # its name, action, reason or time (the CLI's table is read against the
  # times each control was sent); records not newest first; a record
  # outside its rollout's timeline, or not right after its control; a
  # pause that did not hold wave 2, or a resume or an approval that
  # released nothing (the clusters' primaries). In scale-out mode the
  # records are in NATS JetStream and read back by whichever replica the
  # CLI reaches.
  @both-modes
  Scenario: An operator pauses and resumes a rollout, an approver approves a wave: the audit and the timeline name each
    Given an API token named "olga"
    And wave 2 needs the approvals of "alice"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When version "1.1.0" is pushed
    And "olga" pauses the rollout of "1.1.0" with the reason "incident 42"
    And "alice" approves wave 2 of the rollout of "1.1.0" with the reason "CAB-7"
    Then cluster "c1" of the rollout of "1.1.0" has succeeded
    And no cluster of wave 2 of the rollout of "1.1.0" starts for 10 seconds
    When "olga" resumes the rollout of "1.1.0" with the reason "incident 42 resolved"
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And `flotilla get audit` lists, newest first, at the times they were sent:
      | name  | action  | application | wave | reason               | decision | from      |
      | olga  | resume  | podinfo     |      | incident 42 resolved | allowed  | 127.0.0.1 |
      | alice | approve | podinfo     | 2    | CAB-7                | allowed  | 127.0.0.1 |
      | olga  | pause   | podinfo     |      | incident 42          | allowed  | 127.0.0.1 |
    And `flotilla get audit --application podinfo --since 1h -o json` names the rollout of "1.1.0" and the tokens "olga,alice" that sent them
    And the timeline of the rollout of "1.1.0" has each audit record right after its control
    And the web UI's timeline of the rollout of "1.1.0" says "olga pause: allowed · reason: incident 42"

  # Catches: an X-Forwarded-For believed from any peer (a client forging
  # its address), or not believed from the trusted proxy (the proxy's
  # address, 127.0.0.2, recorded for every client behind it), or its
  # first hop believed (a client's own header, which the proxy appends
  # its client's address to: 198.51.100.66 recorded).
  Scenario: Behind a trusted proxy the audit records the client's address; a forged X-Forwarded-For is ignored
    Given flotilla trusts a reverse proxy that reaches it from 127.0.0.2 (server.trustedProxies)
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When `flotilla fleet stop --reason "maintenance"` is run through the proxy
    And `fleet start` is sent straight to flotilla with the header "X-Forwarded-For: 203.0.113.9"
    And `fleet stop` is sent through the proxy with the header "X-Forwarded-For: 198.51.100.66"
    Then `flotilla get audit` lists, newest first, at the times they were sent:
      | name    | action            | application | wave | reason      | decision | from      |
      | default | stop-line (stop)  |             |      |             | allowed  | 127.0.0.1 |
      | default | stop-line (start) |             |      |             | allowed  | 127.0.0.1 |
      | default | stop-line (stop)  |             |      | maintenance | allowed  | 127.0.0.1 |
    And the fleet is stopped

  # Catches: audit records that never reach the CDEvents sink (kept in the
  # journal only), a custom CDEvent named by sdk-go v0.5.1's empty GetType
  # ("dev.cdevents.<undefined-subject>.<undefined-predicate>..." instead of
  # dev.cdeventsx.flotilla-audit.recorded.0.1.0), a record whose content
  # lost who sent it, the action, the detail or the decision, a refused
  # control or a token's creation or revocation left out, and records sent
  # out of the journal's order.
  Scenario: Every audit record reaches the CDEvents sink as a custom CDEvent: a token created, its refused stop of the line, its revocation, a stop of the line
    Given a CDEvents sink
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When the admin runs `flotilla token create ci-viewer --project default --role viewer --expires 30d`
    Then on every replica the token "ci-viewer" stopping the fleet is refused with 403 "ci-viewer may not stop-line"
    When the admin runs `flotilla token revoke ci-viewer`
    And `flotilla fleet stop` is run
    Then the fleet is stopped
    And the CDEvents sink received the audit records, in the journal's order, as dev.cdeventsx.flotilla-audit.recorded.0.1.0 CDEvents:
      | name      | token     | action    | detail begins    | decision |
      | default   | default   | tokens    | create ci-viewer | allowed  |
      | ci-viewer | ci-viewer | stop-line |                  | refused  |
      | default   | default   | tokens    | revoke ci-viewer | allowed  |
      | default   | default   | stop-line | stop             | allowed  |
    And every CDEvent the sink received validates against the CDEvents spec
