Feature: A real local fleet
  Every test of flotilla runs against real Kubernetes API servers. The clusters of
  one fleet share an etcd but must never see each other's objects.

  Scenario: Two clusters are isolated
    Given a fresh namespace in cluster "c1"
    When a ConfigMap "probe" is created in that namespace of cluster "c1"
    Then the ConfigMap "probe" exists in that namespace of cluster "c1"
    And the namespace is absent from cluster "c2"
    And the ConfigMap "probe" is absent from that namespace of cluster "c2"
