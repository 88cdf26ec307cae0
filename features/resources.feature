Feature: Applications as resources of the management cluster
  With server.resources, flotilla watches the Application resources
  (flotilla.dev/v1alpha1) of the teams' namespaces in the management
  cluster and adds their applications to the configuration file's, live:
  validated with the file as one configuration and swapped in as a
  reload of the file is. A team applies, edits and deletes its
  Application with kubectl; its status says whether flotilla took it
  (Ready, or why not) and what became of its versions and rollouts.
  The platform team keeps the fleet's clusters as Cluster resources of
  its own namespaces (server.resources.platformNamespaces), each with its
  kubeconfig in a Secret beside it, and the fleet's waves as a
  WavePolicy there; a Cluster anywhere else changes nothing and says so.

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

  # Catches Cluster resources read only at start-up or never (c4's is
  # applied while flotilla runs), labels not read from the spec (c4 in no
  # wave: its primary stays on its old version), a cluster not reached with
  # the kubeconfig of the Secret its Cluster names (c4's run fails), and a
  # status never written (no Ready, no wave in kubectl's columns; in
  # scale-out mode, written by one replica).
  @both-modes
  Scenario: kubectl apply of a Cluster labelled for the last wave in the platform's namespace: it is in that wave's next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "c1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When `kubectl apply` of a Cluster "c4" labelled "tier=prod" and its kubeconfig Secret in the platform namespace
    Then the Cluster "c4" is Ready in wave "wave-2"
    And flotilla lists cluster "c4" in wave "wave-2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in cluster "c4" runs version "1.1.0" by digest
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches a Cluster honoured outside the platform's namespaces (a team
  # would add its own cluster to the fleet: c4 would be in wave-2 and its
  # workload updated to 1.1.0), a refusal said nowhere the team reads it
  # (no Ready=False naming platformNamespaces), and a refusal that takes
  # the rest down (1.1.0 does not roll out to c1 and c2).
  Scenario: A Cluster in a team's namespace: not Ready, saying why; nothing changes
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "c1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "podinfo" runs its old version in cluster "c4"
    When `kubectl apply` of a Cluster "c4" labelled "tier=prod" and its kubeconfig Secret in the team's namespace
    Then the Cluster "c4" is not Ready, reason "NotPlatformNamespace", its message naming "server.resources.platformNamespaces"
    And flotilla lists no cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And the workload "podinfo" in clusters "c4" still runs its first image

  # Catches a WavePolicy read only at start-up or never (the push of 1.1.0
  # would follow the file's waves: c1 first, then c2 without approval), its
  # waves taken without their policy (the second wave would not wait for
  # its approval: c1 would run 1.1.0), and a status never written (no
  # Ready, no waves in kubectl's columns).
  @both-modes
  Scenario: kubectl apply of a WavePolicy in the platform's namespace: the next rollout follows its waves
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "c1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When `kubectl apply` of a WavePolicy in the platform namespace whose waves are "first", the clusters labelled "tier=prod", then "second", those labelled "tier=canary" after 1 approval
    Then the WavePolicy is Ready with the waves "first,second"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" waits for an approval of wave 2
    And the primary in clusters "c2" runs version "1.1.0" by digest
    And the primary in clusters "c1" runs version "1.0.0" by digest

  # Catches a team placing its application in another team's project (the
  # project "other" lists "second", applied in the namespace of project
  # "team": taken, its rollouts would be governed by other's roles), and
  # a refusal said nowhere the team reads it or taking the file's
  # application down with it (podinfo's 1.1.0).
  Scenario: An Application in a project's namespace that another project lists: refused by condition
    Given flotilla watches the Application resources of a team's namespace in cluster "c3"
    And the team's namespace is project "team"'s, and project "other" lists the application "second"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    When `kubectl apply` of the Application "second" that tracks "demo/second" in the team's namespace
    Then the Application "second" is not Ready, reason "ProjectConflict", its message naming "another team's project"
    And flotilla tracks no application "second"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches a refused WavePolicy edit taken anyway (c1 in no wave: the
  # configuration would be refused whole, or c1 left out of the rollout),
  # one that drops the generation accepted before (the file's waves: c1
  # first, no approval, c1 would run 1.1.0), and a refusal said nowhere
  # the platform team reads it.
  Scenario: A WavePolicy edited into one the validator refuses: not Ready with the reason, the waves accepted before stay
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "c1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And `kubectl apply` of a WavePolicy in the platform namespace whose waves are "first", the clusters labelled "tier=prod", then "second", those labelled "tier=canary" after 1 approval
    And the WavePolicy is Ready with the waves "first,second"
    When `kubectl apply` of the WavePolicy with only the wave "first", the clusters labelled "tier=prod"
    Then the WavePolicy is not Ready, reason "Invalid", its message naming "the generation accepted before stays in force"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" waits for an approval of wave 2
    And the primary in clusters "c2" runs version "1.1.0" by digest
    And the primary in clusters "c1" runs version "1.0.0" by digest

  # Catches a Cluster resource whose deletion is never seen (c4 kept in
  # the rollout in flight: its primary would run 1.1.0) or that the rollout
  # waits for, and a removal not said (the rollout would not show c4
  # removed by the resources).
  Scenario: kubectl delete of a Cluster while a rollout is in flight: the rollout finishes with the clusters that remain
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And wave 1 bakes for 20 seconds
    And flotilla watches the Application resources of a team's namespace and the Cluster resources of a platform namespace in cluster "c1"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "podinfo" runs its old version in cluster "c4"
    And `kubectl apply` of a Cluster "c4" labelled "tier=prod" and its kubeconfig Secret in the platform namespace
    And the Cluster "c4" is Ready in wave "wave-2"
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And `kubectl delete` of the Cluster "c4"
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" shows cluster "c4" removed from the fleet by "management cluster resources"
    And the primary in every cluster runs version "1.1.0" by digest
    And the primary in cluster "c4" runs version "1.0.0" by digest
