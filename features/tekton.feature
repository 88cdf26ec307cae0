Feature: Tekton pipelines on the local fleet
  The real Tekton Pipelines controller runs PipelineRuns; kwok plays the kubelet
  and completes (or fails) their task pods.

  Scenario: A two-task pipeline succeeds
    Given a fresh namespace in cluster "c2"
    When a PipelineRun "two-tasks" runs task "first" and then task "second"
    Then the PipelineRun "two-tasks" ends "Succeeded"
    And its TaskRuns "first" and "second" ended "Succeeded", "second" after "first"

  Scenario: A failing task fails the pipeline
    Given a fresh namespace in cluster "c2"
    When a PipelineRun "doomed" runs task "first" and then task "second", and the pod of "first" fails
    Then the PipelineRun "doomed" ends "Failed"
    And its TaskRun "second" never ran

  Scenario: Tekton reports its PipelineRuns to flotilla
    Given a fresh namespace in cluster "c4"
    And flotilla receives the CloudEvents of Tekton in cluster "c4"
    When a PipelineRun "reported" runs task "first" and then task "second"
    Then the PipelineRun "reported" ends "Succeeded"
    And flotilla journaled the PipelineRun "reported" of cluster "c4" as "started, running, succeeded"
