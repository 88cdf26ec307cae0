Feature: Applications as resources of the management cluster
  With server.resources, flotilla watches the Application resources
  (flotilla.dev/v1alpha1) of the teams' namespaces in the management
  cluster and adds their applications to the configuration file's, live:
  validated with the file as one configuration and swapped in as a
  reload of the file is. A team applies, edits and deletes its
  Application with kubectl; its status says whether flotilla took it
  (Ready, or why not) and what became of its versions and rollouts.

  Background:
    Given a registry

  # Catches resources read once at start-up or never (the application
  # applied after the start is never rolled out: no rollout of 2.0.0), a
  # source that replaces the file's applications instead of adding to them
  # (podinfo's 1.1.0 starts no rollout), and a status never written or not
  # following the application (no Ready, no rollout of 2.0.0 in it, nothing
  # deployed in kubectl's columns).
  Scenario: kubectl apply of an Application in a team's namespace: the next push rolls out to its clusters, its status shows the rollout
    Given flotilla watches the Application resources of a team's namespace in cluster "c3"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When `kubectl apply` of the Application "second" that tracks "demo/second" in the team's namespace
    And the workload "second" runs in every cluster of the waves
    Then the Application "second" is Ready
    When version "2.0.0" of "second" is pushed
    Then the rollout of "2.0.0" succeeds
    And the primary of "second" in clusters "c1,c2" runs version "2.0.0" by digest
    And the status of the Application "second" shows the rollout of "2.0.0" "Succeeded" and "2.0.0" deployed
    And `kubectl get applications.flotilla.dev` lists "second" Ready with "2.0.0" deployed
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches an invalid resource taken anyway (its clusterSelector matches
  # no cluster: the configuration would be refused whole, or the
  # application tracked), a refusal that takes the file's applications
  # down with it (podinfo's 1.1.0 does not roll out), a refusal said
  # nowhere a team reads it (no Ready=False naming the field), and a CRD
  # without the schema's enum (an unknown track is stored).
  Scenario: An invalid Application: refused by the schema, or not Ready with the validator's reason; nothing else changes
    Given flotilla watches the Application resources of a team's namespace in cluster "c3"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When `kubectl apply` of the Application "second" that tracks "demo/second" whose clusterSelector matches no cluster
    Then the Application "second" is not Ready, reason "Invalid", its message naming "spec.clusterSelector"
    And flotilla tracks no application "second"
    And `kubectl apply` of the Application "third" on track "Sometimes" is refused, naming "spec.track"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches a deletion never seen (the push of 2.1.0 would roll out, or
  # be verified against the deleted application), and a source that
  # drops the file's applications with it (podinfo's 1.1.0).
  Scenario: kubectl delete of an Application: a push no longer rolls it out
    Given flotilla watches the Application resources of a team's namespace in cluster "c3"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When `kubectl apply` of the Application "second" that tracks "demo/second" in the team's namespace
    And the workload "second" runs in every cluster of the waves
    Then the Application "second" is Ready
    When `kubectl delete` of the Application "second"
    Then flotilla tracks no application "second"
    When version "2.1.0" of "second" is pushed
    Then flotilla rejects the push of "2.1.0" as not tracked by any application
    And the workload "second" in clusters "c1,c2" still runs its first image
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
