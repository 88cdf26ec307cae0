Feature: Logs and traces
  With telemetry.tracing set, flotilla exports each rollout as one
  OpenTelemetry trace over OTLP/HTTP, built from its journal: the rollout is
  the root span, the push and each wave are its children, each cluster's
  delivery is a child of its wave and each pipeline run a child of its
  cluster. Every span of a rollout is in the trace its id derives.

  Scenario: With tracing on, a rollout through two waves is one trace: the push, each wave, each cluster's apply
    Given a registry
    And an OTLP receiver
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the OTLP receiver holds the trace of the rollout of "1.1.0": its push, then wave "c1", then wave "c2,c4", each cluster's apply under its wave
