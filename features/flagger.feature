Feature: Flagger canaries on the local fleet
  The real Flagger controller takes canaries of the kubernetes provider through
  blue/green analysis in each cluster of the fleet, calls its gate webhooks and
  reports every step to its event webhook.

  Scenario: A new image is promoted
    Given a fresh namespace in cluster "c1"
    And a Deployment "podinfo" running image "ghcr.io/stefanprodan/podinfo:6.0.0"
    And a blue/green Canary for "podinfo" with 2 iterations every 1s
    When the Canary "podinfo" reaches phase "Initialized"
    And the Deployment "podinfo" is changed to image "ghcr.io/stefanprodan/podinfo:6.0.1"
    Then the Canary "podinfo" reaches phase "Succeeded"
    And the Deployment "podinfo-primary" runs image "ghcr.io/stefanprodan/podinfo:6.0.1"

  # c3 runs the stock Flagger build (10 s minimum analysis interval), so the
  # fleet's fast build is never the only one tested.
  Scenario: A failing rollout gate keeps the old image
    Given a fresh namespace in cluster "c3"
    And a gate server answering 500
    And a Deployment "podinfo" running image "ghcr.io/stefanprodan/podinfo:6.0.0"
    And a blue/green Canary for "podinfo" with 2 iterations every 10s and a "rollout" gate
    When the Canary "podinfo" reaches phase "Initialized"
    And the Deployment "podinfo" is changed to image "ghcr.io/stefanprodan/podinfo:6.0.1"
    Then the Canary "podinfo" reaches phase "Failed"
    And the Deployment "podinfo-primary" runs image "ghcr.io/stefanprodan/podinfo:6.0.0"
    And the gate server was called with the canary's name, namespace and phase "Progressing"

  Scenario: Event webhooks reach a local server
    Given a fresh namespace in cluster "c2"
    And an event recorder
    And a Deployment "podinfo" running image "ghcr.io/stefanprodan/podinfo:6.0.0"
    And a blue/green Canary for "podinfo" with 2 iterations every 1s and an event webhook
    When the Canary "podinfo" reaches phase "Initialized"
    Then the event recorder receives an event for "podinfo" with phase "Initialized" and a message containing "Initialization done"
    And every recorded event carries the canary's name, namespace, phase and metadata.eventMessage
