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

  # Catches: image triggers accepted and ignored (the push of 4.0.1 commits
  # nothing); the track ignored (4.1.0, a minor upgrade, committed under
  # PatchLevel) or mapped onto another of flotilla's tracks; the repository
  # not read from repoValue in the release's values (kafka's is in its
  # valuesFile, moved to the scenario's registry); the tag written anywhere
  # but the release's values entry in releases.yaml, or the file re-encoded
  # (the Then step compares the whole file, its comments and blank lines);
  # the commit left to a git webhook that never comes (flotilla must roll
  # out its own commit) or rolled out to prod before staging promoted.
  Scenario: A KubeCD image trigger commits a pushed tag to releases.yaml, and that commit rolls out through the waves
    Given a deployments repository with KubeCD's example files, environment "staging" in cluster "c1" then "prod" in cluster "c2", and releases of charts from a Helm repository and an OCI registry served by the test
    And the image "confluentinc/cp-kafka" of the repository's values is the scenario's registry's
    And flotilla serving that repository's KubeCD files
    When the repository's first commit is pushed
    Then every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed
    When tag "4.1.0" of "confluentinc/cp-kafka" is pushed to the scenario's registry
    Then flotilla skips tag "4.1.0" for release "kafka" because "4.1.0 is a minor upgrade of 4.0; track PatchLevel allows patch upgrades only", and the deployments repository stays as it was
    And `flotilla describe application kafka` says the last push skipped was "4.1.0", because "track PatchLevel allows patch upgrades only"
    When tag "4.0.1" of "confluentinc/cp-kafka" is pushed to the scenario's registry
    Then the deployments repository's branch "main" has one new commit by flotilla, setting "image.tag" of release "kafka" to "4.0.1" in "analytics/releases.yaml" and nothing else
    And every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed
    And in clusters "c1,c2" the primaries run that commit: "kafka" image "{registry}/confluentinc/cp-kafka:4.0.1", "clickhouse" image "yandex/clickhouse-server:1.1"

  # Catches: a KubeCD release failing in wave 2 left in place (prod keeps
  # the failed commit) or rolled back only there (staging keeps the commit
  # it promoted); the revert rendering the branch's head, which still says
  # 4.0.1, instead of the commit each cluster ran before.
  Scenario: A tag a KubeCD trigger committed fails in wave 2, and every cluster goes back to the commit it ran before
    Given a deployments repository with KubeCD's example files, environment "staging" in cluster "c1" then "prod" in cluster "c2", and releases of charts from a Helm repository and an OCI registry served by the test
    And the image "confluentinc/cp-kafka" of the repository's values is the scenario's registry's
    And flotilla serving that repository's KubeCD files
    When the repository's first commit is pushed
    Then every release's rollout of that commit succeeds, staging's cluster promoted before prod's changed
    Given the analysis gate fails in cluster "c2"
    When tag "4.0.1" of "confluentinc/cp-kafka" is pushed to the scenario's registry
    Then the deployments repository's branch "main" has one new commit by flotilla, setting "image.tag" of release "kafka" to "4.0.1" in "analytics/releases.yaml" and nothing else
    And every release's rollout of that commit is rolled back, staging's cluster promoted before prod's changed
    And in clusters "c1,c2" the primaries run the first commit: "kafka" image "{registry}/confluentinc/cp-kafka:4.0", "clickhouse" image "yandex/clickhouse-server:1.1"
