Feature: Rollouts run as PipelineRuns on a cluster's real Tekton
  With fleet.executor tekton, flotilla serve runs each cluster's rollout
  pipeline as a PipelineRun of flotilla-rollout in the Tekton of one fleet
  cluster, where `flotilla pipelines install` put the Tasks and the Pipeline.
  The labels of fleet.tekton go on every run and, through Tekton, on its pods:
  here simfail=on-host, which has the fleet run the steps' flotilla commands
  on this machine (kwok runs no containers). On a real node (containerd and
  runc), the steps run for real: Tekton's entrypoint, then flotilla's image.

  Scenario: A version rolled out by Tekton pipelines reaches every cluster
    Given a registry
    And a CDEvents sink
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And that namespace holds a succeeded PipelineRun of the rollout of "1.1.0" for every cluster, its pods labelled alike
    And for each cluster the CDEvents sink received pipelinerun.queued, pipelinerun.started, pipelinerun.finished and service.upgraded of "1.1.0", in that order
    And every CDEvent the sink received validates against the CDEvents spec

  Scenario: A git push rolled out by Tekton pipelines renders and applies the commit in every cluster
    Given a deployments repository with the chart "podinfo" and values for clusters "c1,c2"
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1"
    And flotilla runs its rollout pipelines there on Tekton, labelled "simfail=on-host"
    And flotilla serving the git application "podinfo" from that chart in waves "c1" then "c2"
    And the repository's first commit has been rolled out to every cluster
    When a push changes "greeting" to "hej" in "charts/podinfo/values.yaml"
    Then the rollout of that commit succeeds
    And the primary and the workload in every cluster run that commit, greeting "hej"

  Scenario: flotilla on a real node runs its pipelines on Tekton there, every step a container of its image by digest
    Given a real node in cluster "c1", its pods on a network of their own
    And a registry
    And flotilla's pipelines are installed in a fresh namespace of cluster "c1", their steps in flotilla's image on the real node
    And flotilla runs its rollout pipelines there on Tekton, labelled "team=platform"
    And flotilla is configured for the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When flotilla is installed by its Helm chart from its image on the real node
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" is pushed
    Then the rollout of "1.0.0" succeeds
    And the primary in every cluster runs version "1.0.0" by digest
    And that namespace holds a succeeded PipelineRun of the rollout of "1.0.0" for every cluster, its pods labelled alike
    And every step of the rollout of "1.0.0" ran on the real node in a container of flotilla's image by digest, and exited 0
