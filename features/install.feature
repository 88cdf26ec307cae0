Feature: Installing and checking flotilla where platform teams run it
  `flotilla config check` validates a configuration without serving, as a
  CI pipeline or the Helm chart's init container runs it: every problem
  with the path of its field, exit code 1. With --live it reaches each
  cluster of the fleet and checks that it serves Flagger's Canary.

  Scenario: flotilla config check validates a configuration and reaches the fleet
    Given a registry
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    Then `flotilla config check --live` reports the configuration valid and clusters "c1,c2" ready
    And `flotilla config check --live` of the configuration with a cluster "c9" whose API server does not answer fails naming it
    And `flotilla config check` of the configuration with a wave naming cluster "c42" the fleet lacks fails with the field's path
    And the schema `flotilla config schema` prints accepts the configuration flotilla serves, and refuses it with the application's field "track" misspelled "trak", as `flotilla config check` does

  Scenario: flotilla fleet bootstrap makes a fleet without Flagger ready; a second run changes nothing
    Given a registry
    And a fleet of 2 clusters without Flagger
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    Then `flotilla fleet check` reports clusters "c1,c2" not ready, Flagger's Deployment missing
    When `flotilla fleet bootstrap` runs
    Then it created Flagger, its CRDs, its load tester and flotilla's identity in clusters "c1,c2" and wrote their kubeconfigs
    When Flagger runs in every cluster as bootstrap installed it
    Then `flotilla fleet check` reports clusters "c1,c2" ready
    When flotilla starts with the kubeconfigs bootstrap wrote
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" is pushed
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest
    And a second `flotilla fleet bootstrap` leaves every object unchanged

  Scenario: A rollout through the fleet with RBAC enforced and flotilla's own least-privilege identity
    Given a registry
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And `flotilla fleet bootstrap` has given flotilla its identity in clusters "c1,c2" and the Tekton executor's Role in "c1"
    And flotilla starts with the kubeconfigs bootstrap wrote
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" has been applied
    And flotilla is killed with SIGKILL
    And flotilla is started again
    Then the rollout of "1.1.0" succeeds
    Given the analysis gate fails in cluster "c2"
    When version "1.2.0" is pushed
    Then the rollout of "1.2.0" is rolled back
    And no workload in any cluster runs version "1.2.0"
    When flotilla is restarted with the application naming the workload "retired"
    Then the canary "podinfo" is pruned from every cluster of the waves
    And flotilla's identity may patch Deployments in the application's namespace, and may not read Secrets, patch Deployments outside it, delete Namespaces or create ClusterRoleBindings
    And flotilla's identity may run PipelineRuns in the Tekton namespace of "c1" and nowhere else, and the steps' ServiceAccount may do nothing
    And listing Secrets with flotilla's token is denied

  Scenario: flotilla from its image, installed by its Helm chart on a real node, carries a version through the waves and rolls a failing one back
    Given a real node in cluster "c1", its pods on a network of their own
    And a registry
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When flotilla is installed by its Helm chart from its image on the real node
    Then flotilla's pod is Ready on the real node's pod network, from the image by digest, as user 65532 on a read-only root filesystem
    And the API token the chart generated, read from its Secret as its NOTES say, reads flotilla's API as "admin"; without a token flotilla answers 401
    Given the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest
    Given the analysis gate fails in cluster "c2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And no workload in any cluster runs version "1.1.0"

  Scenario: helm upgrade with a changed config while a registry pushes loses no acknowledged webhook
    Given a real node in cluster "c1", its pods on a network of their own
    And a registry
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And flotilla is installed by its Helm chart from its image on the real node
    And the API token the chart generated, read from its Secret as its NOTES say, reads flotilla's API as "admin"; without a token flotilla answers 401
    And the workload "podinfo" runs in every cluster of the waves
    When the chart is upgraded with a changed config while 30 versions are pushed, one every 200ms
    Then a new pod replaced the old one, and every push flotilla acknowledged reached the event sink
    And the API token the chart generated is the one before the upgrade, and still reads flotilla's API as "admin"
    And the rollout of "1.0.30" succeeds
    And the primary in every cluster runs version "1.0.30" by digest

  Scenario: The chart with its default values is refused by helm install, naming what to set
    When the chart is installed with its default values in cluster "c1"
    Then helm install refused it naming "kubeconfigs.existingSecret" and "secrets", and the namespace holds nothing

  # Catches a bootstrap that applies its Flagger (or Flagger's CRDs) over
  # one Helm installed, or next to it, and a check that compares Helm's
  # Deployment with bootstrap's rendering (which calls a newer Flagger
  # outdated). Helm's Flagger is only created, never run: kwok makes its pod
  # Ready.
  Scenario: flotilla fleet bootstrap leaves alone a newer Flagger that Helm installed, and fleet check does not call it outdated
    Given a registry
    And a fleet of 2 clusters without Flagger
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Flagger "1.42.0" installed by Helm as release "flagger" runs in namespace "flagger" of cluster "c1"
    When `flotilla fleet bootstrap` runs
    Then it left the Flagger Helm installed in cluster "c1" as it was and applied none of Flagger's own objects there
    And it created Flagger, its CRDs, its load tester and flotilla's identity in clusters "c2" and wrote their kubeconfigs
    And `flotilla fleet check` reports the Flagger of cluster "c1" newer than the tested one, not outdated

  # Catches a --manage-flagger that still leaves Flagger's objects out where
  # Helm installed a Flagger, or applies them otherwise than bootstrap renders
  # them, and a check --manage-flagger that judges Helm's Flagger instead of
  # comparing flotilla's with its rendering. Helm's Flagger runs in its
  # chart's namespace, bootstrap's goes into its own (flagger-system).
  Scenario: flotilla fleet bootstrap --manage-flagger applies flotilla's Flagger where Helm installed one, and fleet check --manage-flagger reports it ok
    Given a registry
    And a fleet of 2 clusters without Flagger
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Flagger "1.42.0" installed by Helm as release "flagger" runs in namespace "flagger" of cluster "c1"
    When `flotilla fleet bootstrap --manage-flagger` runs
    Then it applied flotilla's Flagger and Flagger's CRDs in cluster "c1" as bootstrap renders them, and left the Deployment of Helm's as it was
    And `flotilla fleet check --manage-flagger` reports flotilla's Flagger ok and clusters "c1,c2" ready

  # Catches a kustomize base that does not run as it is documented: what its
  # kustomization.yaml says to supply, supplied by an overlay the way users
  # write one, must be all it needs.
  Scenario: flotilla from its image, installed by its kustomize base on a real node, carries a version through the waves
    Given a real node in cluster "c1", its pods on a network of their own
    And a registry
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When flotilla is installed by its kustomize base from its image on the real node
    Then flotilla's pod is Ready on the real node's pod network, from the image by digest, as user 65532 on a read-only root filesystem
    Given the workload "podinfo" runs in every cluster of the waves
    When version "1.0.0" is pushed
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest

  # Catches a --manage-flagger that fails where Helm's Flagger stands exactly
  # where bootstrap's goes (the API server refuses Helm's selector and
  # strategy to change in place), or keeps Helm's fields in the object.
  Scenario: flotilla fleet bootstrap --manage-flagger replaces a Flagger Helm installed where bootstrap's goes
    Given a registry
    And a fleet of 2 clusters without Flagger
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And Flagger "1.42.0" installed by Helm as release "flagger" runs in namespace "flagger-system" of cluster "c1"
    When `flotilla fleet bootstrap --manage-flagger` runs
    Then it replaced the Flagger Helm installed in cluster "c1" by flotilla's, as bootstrap renders it
    And `flotilla fleet check --manage-flagger` reports flotilla's Flagger ok and clusters "c1,c2" ready

  # Catches: a bootstrap that grants a git application's inventory (the
  # ConfigMap flotilla-inventory-<application>) only with --allow
  # configmaps: the first commit's rollout would fail in c1, flotilla's own
  # identity forbidden to write it; and one that grants more than the
  # inventory needs (listing ConfigMaps, writing them in other namespaces,
  # reading Secrets).
  Scenario: flotilla fleet bootstrap grants a git application's inventory ConfigMaps without --allow, and nothing more
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla is configured for the git application "podinfo" from that chart in waves "c1" then "c2"
    And `flotilla fleet bootstrap` without --allow has given flotilla its identity in clusters "c1,c2"
    And flotilla starts with the kubeconfigs bootstrap wrote
    And the repository's first commit has been rolled out to every cluster
    Then every cluster's inventory is the first commit's: Deployment podinfo
    And flotilla's identity may get, create, patch and delete ConfigMaps in the application's namespace, and may not list them, write them outside it, or read Secrets
