Feature: KubeCD's files roll out as they are
  A repository holding KubeCD's environments.yaml and release files is
  served unchanged (kubecd.dir): each environment's cluster is the fleet's
  cluster of that name, each environment in file order is a wave, each
  release a git application whose canary Flagger analyses. A release's
  chart comes from the repository, a Helm repository or an OCI registry,
  pinned by version and digest, and its values and resource files are the
  pushed commit's.

  # Catches: KubeCD's files not loaded as written (the seed's releases.yaml
  # must load verbatim); environments not turned into waves in their order
  # (prod's cluster changed before staging's release promoted); a chart
  # reference not pulled (OCI or Helm repository) or rendered without the
  # release's values (clickhouse's locked tag 1.1, kafka's 4.0 over its
  # values file); resource files dropped; values read from the checkout
  # flotilla started with instead of the pushed commit (the second push).
  Scenario: KubeCD's example files roll out through two waves, with charts from an OCI registry and a Helm repository
    Given a deployments repository with KubeCD's example files, environment "staging" in cluster "c1" then "prod" in cluster "c2", and releases of charts from a Helm repository and an OCI registry served by the test
    And flotilla serving that repository's KubeCD files
    When the repository's first commit is pushed
    Then every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed
    And in clusters "c1,c2" the primaries run that commit: "clickhouse" image "yandex/clickhouse-server:1.1", "kafka" image "confluentinc/cp-kafka:4.0", "kafkaesque" image "gcr.io/zedge-prod/kafkaesque:latest", "web" image "registry.example.com/web:1.0.0", "api" image "registry.example.com/api:2.0.0"
    And in clusters "c1,c2" the Deployment "kafka-zookeeper" runs "confluentinc/cp-zookeeper:4.0.1" and the ConfigMap "storage-fast" exists
    When a push sets "image.tag" of release "clickhouse" to "1.2" in "analytics/releases.yaml"
    Then every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed
    And in clusters "c1,c2" the primaries run that commit: "clickhouse" image "yandex/clickhouse-server:1.2"
