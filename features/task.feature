Feature: The apply-canary task
  The task the embedded executor runs, and that Tekton steps run as
  `flotilla task apply-canary`, applies an application's Canary and sets its
  workload's image to a pinned digest, and reports what the workload ran before.

  Scenario: The task applies the canary, pins the image, and can be run again
    Given a fresh namespace in cluster "c1"
    And a Deployment "podinfo" running image "ghcr.io/stefanprodan/podinfo:6.0.0"
    When `flotilla task apply-canary` sets "podinfo" to "ghcr.io/stefanprodan/podinfo@sha256:0000000000000000000000000000000000000000000000000000000000000001" for rollout "r1"
    Then the task reports the previous image "ghcr.io/stefanprodan/podinfo:6.0.0" and a change
    And the Deployment "podinfo" runs image "ghcr.io/stefanprodan/podinfo@sha256:0000000000000000000000000000000000000000000000000000000000000001"
    And the Canary "podinfo" reaches phase "Initialized"
    When `flotilla task apply-canary` sets "podinfo" to "ghcr.io/stefanprodan/podinfo@sha256:0000000000000000000000000000000000000000000000000000000000000001" for rollout "r1"
    Then the task reports the previous image "ghcr.io/stefanprodan/podinfo:6.0.0" and no change

  Scenario: The task refuses a workload that does not exist
    Given a fresh namespace in cluster "c1"
    When `flotilla task apply-canary` sets "missing" to "ghcr.io/stefanprodan/podinfo:6.0.1" for rollout "r2"
    Then the task fails saying "deployment" and "missing" and "not found"
