Feature: What a git commit no longer renders is pruned, and a rollback restores it
  Each cluster's inventory (ConfigMap flotilla-inventory-<application> in the
  application's namespace, entries in the format of Flux's kustomize-controller)
  records the objects a commit applied there. The objects a new commit no
  longer renders are deleted once that cluster succeeded (Flagger promoted the
  commit), workloads first, CRDs and namespaces last; a rollback gives each
  cluster the previous commit's objects exactly: what the failed commit pruned
  is created again, what it added is deleted. With source.git.prune false,
  a dropped object stays.

  # Catches: no pruning at all (the ConfigMap stays), pruning at the apply,
  # before Flagger's analysis (deleted before the cluster succeeded), a prune
  # that deletes what the commit still renders (the Service), an inventory
  # that keeps the dropped object or is not the commit's, and a prune that
  # deletes without telling (no cluster.pruned: the metric, fed from the
  # journal, stays at 0).
  Scenario: A ConfigMap a commit drops is deleted from each cluster after that cluster succeeded
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And the chart also renders the ConfigMap "podinfo-extra" and the Service "podinfo-svc"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    Then every cluster has the ConfigMap "podinfo-extra" and the Service "podinfo-svc"
    And every cluster's inventory is the first commit's: ConfigMap podinfo-extra, Deployment podinfo, Service podinfo-svc
    Given the ConfigMaps "podinfo-extra" are watched in every cluster
    When a push removes "podinfo-extra" from the chart
    Then the rollout of that commit succeeds
    And in every cluster the ConfigMap "podinfo-extra" was deleted after that cluster succeeded
    And in every cluster the Service "podinfo-svc" exists
    And every cluster's inventory is that commit's: Deployment podinfo, Service podinfo-svc
    And flotilla's metrics report:
      | metric                        | labels                                  | count | max seconds |
      | flotilla_pruned_objects_total | application="podinfo",purpose="prune"   | 2     |             |

  # Catches: a rollback that re-applies the previous commit but leaves what
  # the failed commit added (podinfo-new stays), one that does not recreate
  # what the failed commit pruned in the wave that succeeded (podinfo-extra
  # missing in c1), an inventory left at the failed commit, and a revert
  # whose deletions are not told (cluster.pruned, purpose revert).
  Scenario: A commit that fails in wave 2 is rolled back to the previous commit's objects exactly
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c4"
    And the chart also renders the ConfigMap "podinfo-extra" and the Service "podinfo-svc"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c4"
    And the repository's first commit has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    And the ConfigMaps "podinfo-extra,podinfo-new" are watched in every cluster
    When a push removes "podinfo-extra" from the chart and adds the ConfigMap "podinfo-new"
    Then the rollout of that commit is rolled back
    And in cluster "c1" the ConfigMap "podinfo-extra" was deleted and then created again
    And in every cluster the ConfigMap "podinfo-new" does not exist
    And in every cluster the ConfigMap "podinfo-extra" exists
    And every cluster's inventory is the first commit's: ConfigMap podinfo-extra, Deployment podinfo, Service podinfo-svc
    And flotilla's metrics report:
      | metric                        | labels                                  | count | max seconds |
      | flotilla_pruned_objects_total | application="podinfo",purpose="revert"  | 2     |             |

  # Catches: a prune field accepted and ignored (the ConfigMap deleted anyway),
  # and an inventory that still lists what it will never delete.
  Scenario: With prune false a ConfigMap a commit drops stays in the clusters
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And the chart also renders the ConfigMap "podinfo-extra" and the Service "podinfo-svc"
    And the application does not prune
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When a push removes "podinfo-extra" from the chart
    Then the rollout of that commit succeeds
    And every cluster's inventory is that commit's: Deployment podinfo, Service podinfo-svc
    And in every cluster the ConfigMap "podinfo-extra" exists
