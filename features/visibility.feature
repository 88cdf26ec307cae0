Feature: The fleet seen from outside: CDEvents
  flotilla posts the CDEvents (spec v0.5) of what it does to the sinks of
  events.cdevents: the verified image as an artifact.published, each
  cluster's pipeline runs as pipelinerun.queued, started and finished, each cluster
  done as a service.upgraded (or deployed, or rolledback), in the
  environment of its cluster, the rollout's id as chain id.

  Background:
    Given a registry
    And a CDEvents sink

  Scenario: A rollout emits the CDEvents of its life, in order, each valid
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the CDEvents sink received the artifact.published of "1.1.0" before any other CDEvent of its rollout
    And for each cluster the CDEvents sink received pipelinerun.queued, pipelinerun.started, pipelinerun.finished and service.upgraded of "1.1.0", in that order
    And the CDEvents sink received the service.upgraded of "1.1.0" for "c1" before those for "c2,c4"
    And every CDEvent the sink received validates against the CDEvents spec

  Scenario: A rolled back rollout emits a service.rolledback for each cluster it put back
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And the CDEvents sink received a service.rolledback of "1.1.0" for "c1", back to version "1.0.0"
    And every CDEvent the sink received validates against the CDEvents spec

  Scenario: After a rollout and a rollback, the metrics endpoint reports them
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And the analysis gate fails in cluster "c4"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And flotilla's metrics report:
      | metric                            | labels                                    | count | max seconds |
      | flotilla_rollouts                 | phase="Progressing"                       | 0     |             |
      | flotilla_rollouts                 | phase="Failed"                            | 0     |             |
      | flotilla_rollout_duration_seconds | application="podinfo",phase="Succeeded"   | 1     | 600         |
      | flotilla_rollout_duration_seconds | application="podinfo",phase="RolledBack"  | 1     | 600         |
      | flotilla_push_to_fleet_seconds    | application="podinfo"                     | 1     | 600         |
      | flotilla_wave_duration_seconds    | application="podinfo",result="succeeded"  | >= 3  | 600         |
      | flotilla_wave_duration_seconds    | application="podinfo",result="failed"     | 1     | 600         |
      | flotilla_cluster_results_total    | result="succeeded"                        | >= 4  |             |
      | flotilla_cluster_results_total    | result="failed"                           | 1     |             |
      | flotilla_cluster_results_total    | result="reverted"                         | 3     |             |
      | flotilla_reaction_seconds         | step="push_to_first_apply"                | 2     | 5           |
      | flotilla_reaction_seconds         | step="wave_to_next_wave"                  | >= 2  | 5           |
      | flotilla_reaction_seconds         | step="failure_to_rollback"                | >= 1  | 5           |
      | flotilla_rollbacks_total          | application="podinfo",trigger="automatic" | 1     |             |
      | flotilla_time_to_restore_seconds  | application="podinfo"                     | 1     | 600         |
