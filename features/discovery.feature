Feature: Clusters discovered from an inventory
  With fleet.discovery.argocd, flotilla takes the clusters Argo CD knows
  from its declarative cluster Secrets in the management cluster, beside
  the file's fleet.clusters, live: a Secret that appears is a cluster in
  the wave its labels select, for the next rollout, without a restart.
  With fleet.discovery.clusterProfiles, it takes those of a sig-multicluster
  cluster inventory, its ClusterProfiles, the same way, and with
  fleet.discovery.clusterAPI those Cluster API manages.

  Background:
    Given a registry

  # Catches clusters discovered only at start-up (c4's Secret appears while
  # flotilla runs), a cluster without a client (its run fails), labels not
  # read from the Secret (c4 in no wave: its primary stays on 1.0.0), and a
  # discovered cluster reached with the wrong credentials.
  @both-modes
  Scenario: An Argo CD cluster Secret labelled for the last wave appears: it is in that wave's next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla discovers clusters from Argo CD's cluster Secrets in cluster "c1" labelled "flotilla.dev/fleet=demo"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When an Argo CD cluster Secret for cluster "c4" labelled "flotilla.dev/fleet=demo,tier=prod" is created
    Then flotilla lists cluster "c4" in wave "wave-2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in cluster "c4" runs version "1.1.0" by digest
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches a discovered cluster that only a push reaches: with the
  # reconcile on, c4, appearing after the fleet converged on 1.0.0 and
  # running its old version, gets 1.0.0 through its wave's pipeline
  # without a push (the nothing-missed issue's catch-up).
  Scenario: A cluster discovered after the fleet converged is caught up to the validated digest without a push
    Given flotilla checks the clusters against the validated digest every "2s"
    And clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla discovers clusters from Argo CD's cluster Secrets in cluster "c1" labelled "flotilla.dev/fleet=demo"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When an Argo CD cluster Secret for cluster "c4" labelled "flotilla.dev/fleet=demo,tier=prod" is created
    Then a rollout of kind "catch-up" of "1.0.0" to "c4" succeeds
    And the primary in cluster "c4" runs version "1.0.0" by digest
    And the primary in every cluster runs version "1.0.0" by digest

  # Catches a cluster whose Secret is deleted kept in the rollout in flight
  # (started without a client: the rollout fails, or waits for it) or
  # touched after it left (its primary would run 1.1.0).
  Scenario: An Argo CD cluster Secret deleted while a rollout is in flight: the rollout finishes with the clusters that remain
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And wave 1 bakes for 20 seconds
    And flotilla discovers clusters from Argo CD's cluster Secrets in cluster "c1" labelled "flotilla.dev/fleet=demo"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the workload "podinfo" runs its old version in cluster "c4"
    And an Argo CD cluster Secret for cluster "c4" labelled "flotilla.dev/fleet=demo,tier=prod" is created
    And flotilla lists cluster "c4" in wave "wave-2"
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" is baking
    And the Argo CD cluster Secret of cluster "c4" is deleted
    Then the rollout of "1.1.0" succeeds
    And the rollout of "1.1.0" shows cluster "c4" removed from the fleet by "cluster discovery"
    And the primary in every cluster runs version "1.1.0" by digest
    And the primary in cluster "c4" runs version "1.0.0" by digest

  # Catches ClusterProfiles read only at start-up (c4's appears while
  # flotilla runs), labels not read from the ClusterProfile (c4 in no wave:
  # its primary stays on 1.0.0), and a cluster not reached as the access
  # provider says: the server and CA of the ClusterProfile's
  # status.accessProviders, the credential the provider's exec plugin
  # prints for the cluster its additional-envs extension names (c4's run
  # would fail).
  @both-modes
  Scenario: A ClusterProfile labelled for the last wave appears: it is in that wave's next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla discovers clusters from ClusterProfiles in cluster "c1" labelled "flotilla.dev/fleet=demo"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When a ClusterProfile for cluster "c4" labelled "flotilla.dev/fleet=demo,tier=prod" is created
    Then flotilla lists cluster "c4" in wave "wave-2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in cluster "c4" runs version "1.1.0" by digest
    And the primary in every cluster runs version "1.1.0" by digest

  # Catches Clusters read only at start-up, labels not read from the
  # Cluster (they are not on its kubeconfig Secret: c4 would be in no wave
  # and its primary stay on 1.0.0), and a cluster not reached with its
  # kubeconfig Secret.
  @both-modes
  Scenario: A Cluster API cluster labelled for the last wave is provisioned: it is in that wave's next rollout
    Given clusters "c1" are labelled "tier=canary"
    And clusters "c2" are labelled "tier=prod"
    And wave 1 is the clusters labelled "tier=canary"
    And wave 2 is the clusters labelled "tier=prod"
    And flotilla discovers clusters from Cluster API in cluster "c1" labelled "flotilla.dev/fleet=demo"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the workload "podinfo" runs its old version in cluster "c4"
    When Cluster API provisions cluster "c4" labelled "flotilla.dev/fleet=demo,tier=prod"
    Then flotilla lists cluster "c4" in wave "wave-2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in cluster "c4" runs version "1.1.0" by digest
    And the primary in every cluster runs version "1.1.0" by digest
