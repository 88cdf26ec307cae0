Feature: Scale-out mode: three active replicas on NATS JetStream lose nothing when a replica or a NATS node goes
  In scale-out mode (server.bus) flotilla's events and rollout state live in a
  replicated JetStream stream and KV buckets of a three-node NATS cluster, and
  the work is shared by partitions, each handled by one replica at a time.
  The scenarios run three `flotilla serve` behind one address, as a
  Kubernetes Service puts them: any replica answers webhooks (Flagger's
  too), the API and the CLI. Scenarios tagged @both-modes elsewhere run here
  too, unchanged.

  Background:
    Given a registry

  @scale-out
  Scenario: A replica killed with SIGKILL mid-wave: the others complete the rollout, no cluster applied twice
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" has been applied
    And the replica holding the rollout of "1.1.0" is killed with SIGKILL
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And no cluster was applied twice for one step, as its API server recorded
    And the other replicas hold every partition, the killed one's included

  @scale-out
  Scenario: A NATS node killed mid-rollout: nothing acknowledged is lost, the rollout completes
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    And wave 1 of the rollout of "1.1.0" has been applied
    And the NATS node leading flotilla's stream is killed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And no cluster was applied twice for one step, as its API server recorded
    When the NATS node is started again
    And version "1.2.0" is pushed
    Then the rollout of "1.2.0" succeeds
    And the primary in every cluster runs version "1.2.0" by digest

  @scale-out
  Scenario: A rolling restart of every replica during a burst of pushes: every acknowledged push rolled out, none stalled
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When the replicas are restarted one by one while 20 versions are pushed, one every 200ms
    Then every push flotilla acknowledged reached the event sink and its rollout ended
    And the rollout of "1.0.20" succeeds
    And the primary in every cluster runs version "1.0.20" by digest
    And no cluster was applied twice for one step, as its API server recorded

  @both-modes
  Scenario: kubectl get fleetrollouts follows a rollout through its waves
    Given flotilla keeps FleetRollouts in cluster "c3"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2,c4"
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    And `kubectl get fleetrollouts --watch` runs in that cluster
    When version "1.1.0" is pushed
    Then `kubectl get fleetrollouts --watch` showed the rollout of "1.1.0" in wave "1/2 wave-1", then "2/2 wave-2", then "Succeeded"
    And `kubectl get fleetrollouts` lists the rollout of "1.1.0" as "Succeeded" with clusters "3/3"
