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

  # Catches: a limit on failed API tokens of each replica's own (replica
  # 2 would answer 401 to the client's 11th unknown token, its own 5th,
  # and 429 only at its own 11th: three replicas would grant an attacker
  # three times the guesses), a shared bucket the other replicas do not
  # watch (replica 3, which the client never reached, would answer the
  # token), a bucket not kept in the NATS KV, a limit that locks out every
  # client rather than the address that failed (the API token from
  # 198.51.100.9 refused), and a Retry-After that does not hold (the API
  # token still refused once it passed).
  @scale-out
  Scenario: Unknown API tokens sent to one replica then another spend one limit, which every replica enforces
    Given flotilla takes the client's address from X-Forwarded-For when the peer is 127.0.0.1 (server.trustedProxies)
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    When a client at "203.0.113.7" sends 6 unknown API tokens to replica 1
    And the client at "203.0.113.7" sends unknown API tokens to replica 2 until one is refused with 429
    Then replica 1 refused its 6 with 401, and replica 2 refused 4 with 401 before its 429 with Retry-After: the limit of 10 spent over both
    And the NATS KV bucket every replica reads holds the limit of "203.0.113.7" spent
    And replica 3, which "203.0.113.7" never reached, refuses even the API token from it with 429 and Retry-After within 3 seconds
    And the API token from a client at "198.51.100.9" reads the rollouts on every replica
    When the Retry-After replica 2 gave has passed
    Then the API token from "203.0.113.7" reads the rollouts on every replica again

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
