Feature: The CLI keeps kubectl's habits: -o json, yaml, wide or name, an unknown format refused
  `flotilla get` prints what a running flotilla knows as a table, or with
  -o json, yaml, wide (more columns) or name (KIND/NAME), as kubectl does.
  An unknown format, like an unknown kind, is a usage error (exit 2) that
  prints nothing on stdout: never the table with exit 0.

  Background:
    Given a registry
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"

  # Catches: -o yaml printing the table, or JSON (which a YAML parser takes
  # too), or YAML whose keys are not the API's (an encoder that ignores the
  # json tags: a strict decode fails); a rollout whose digest is not the
  # one the clusters' primaries run (the wrong rollout, a digest dropped).
  Scenario: `flotilla get rollouts -o yaml` prints YAML
    Given the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And `flotilla get rollouts -o yaml` prints the rollout of "1.1.0" as YAML with the digest every cluster's primary runs

  # Catches: an unknown format printing the table and exiting 0 (as the
  # CLI did), a format checked after the list was printed (stdout not
  # empty), an error that does not name the formats; `flotilla get` of an
  # unknown kind printing the help and exiting 0.
  Scenario: `flotilla get rollouts -o bogus` fails naming the formats
    Then `flotilla get rollouts -o bogus` exits 2, prints nothing and names the formats "json,yaml,wide,name,table"
    And `flotilla get bogus` exits 2, prints nothing and names the kinds "applications,audit,clusters,rollouts"
