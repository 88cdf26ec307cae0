Feature: Every delivery strategy, analysed by the real Flagger on real metrics
  flotilla renders the application's delivery (Kurator's rollout policy,
  Kanary's validation) into Flagger canaries; the real Flagger of each
  cluster routes traffic through the provider's objects (Gateway API
  HTTPRoutes, Istio VirtualServices), runs its analysis as PromQL against a
  real Prometheus, and calls a real load tester. The mesh's request metrics
  are served by the test, which decides whether the canary is healthy.

  Background:
    Given a registry

  Scenario: A Gateway API canary shifts weight step by step, then is promoted
    Given the Flagger of cluster "c1" runs with -mesh-provider "gatewayapi:v1"
    And the "gatewayapi" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: canary
      provider: gatewayapi
      iterations: null
      trafficRouting:
        gateways: [gateway-system/public]
        canaryStrategy: {stepWeight: 20, maxWeight: 60}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
          - {name: request-duration, interval: 30s, thresholdRange: {max: 500}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the HTTPRoute "podinfo" is watched in cluster "c1"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And in cluster "c1" the canary's weight went 20, 40, 60 and back to 0

  Scenario: A failing request success rate rolls the whole fleet back
    Given the "gatewayapi" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: canary
      provider: gatewayapi
      iterations: null
      threshold: 2
      trafficRouting:
        gateways: [gateway-system/public]
        canaryStrategy: {stepWeight: 20, maxWeight: 60}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the HTTPRoute "podinfo" is watched in cluster "c1"
    And the mesh reports the workload "podinfo" failing
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And no workload in any cluster runs version "1.1.0"
    And in cluster "c1" the canary's weight went 20 and back to 0
    And Flagger of cluster "c1" halted the analysis on "success rate"

  Scenario: An Istio canary writes its VirtualService and DestinationRules and shifts weight
    Given the Flagger of cluster "c2" runs with -mesh-provider "istio"
    And the "istio" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: canary
      provider: istio
      iterations: null
      trafficRouting:
        hosts: [podinfo.example.com]
        canaryStrategy: {stepWeight: 25, maxWeight: 50}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
          - {name: request-duration, interval: 30s, thresholdRange: {max: 500}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the VirtualService "podinfo" is watched in cluster "c1"
    And the VirtualService "podinfo" is watched in cluster "c2"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And in cluster "c1" the canary's weight went 25, 50 and back to 0
    And in cluster "c2" the canary's weight went 25, 50 and back to 0
    And every cluster of the waves has the DestinationRules "podinfo-primary" and "podinfo-canary"
    And in every cluster of the waves the VirtualService "podinfo" serves the hosts "podinfo.example.com"

  Scenario: A-B testing on the Gateway API sends the matching requests to the canary
    Given the "gatewayapi" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: abTesting
      provider: gatewayapi
      iterations: 3
      trafficRouting:
        gateways: [gateway-system/public]
        timeout: 30s
        match:
          - headers: {x-canary: {exact: insider}}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the HTTPRoute "podinfo" is watched in cluster "c1"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And in cluster "c1" the requests with header "x-canary" exactly "insider" went to the canary during the analysis

  Scenario: Blue-green with mirroring on Istio mirrors the traffic to the canary
    Given the "istio" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: blueGreen
      provider: istio
      iterations: 3
      trafficRouting:
        mirror: true
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the VirtualService "podinfo" is watched in cluster "c1"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And in cluster "c1" the traffic was mirrored to "podinfo-canary" during the analysis

  Scenario Outline: A custom metric flotilla renders as a MetricTemplate gates the rollout
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      trafficAnalysis:
        metrics:
          - name: error-rate
            interval: 30s
            thresholdRange: {max: 1}
            customMetric:
              provider: {type: prometheus, address: "{{prometheus}}"}
              query: |
                sum(rate(http_request_duration_seconds_count{kubernetes_namespace="{{ namespace }}",kubernetes_pod_name=~"{{ target }}-.*",status=~"5.."}[{{ interval }}]))
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the mesh reports the workload "podinfo" <health>
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" <outcome>
    And the primary in every cluster runs version "<running>" by digest
    And every cluster of the waves has the MetricTemplate "podinfo-error-rate" querying the fleet's Prometheus

    Examples:
      | health  | outcome        | running |
      | healthy | succeeds       | 1.1.0   |
      | failing | is rolled back | 1.0.0   |

  Scenario: A Kanary PromQL validation that fails rolls the fleet back
    Given the application's validation is:
      """
      validationPeriod: 1m
      items:
        - promQL:
            query: |
              sum(rate(istio_requests_total{destination_workload_namespace="{{ namespace }}",destination_workload="{{ target }}",response_code="500"}[{{ interval }}])) < bool 0.1
      """
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2"
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the mesh reports the workload "podinfo" failing
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" is rolled back
    And the primary in every cluster runs version "1.0.0" by digest
    And Flagger of cluster "c1" halted the analysis on "promql-1"

  Scenario: The load tester runs the analysis' load test against the canary
    Given a load test target
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      iterations: 3
      trafficAnalysis:
        webhooks:
          url: "{{loadtester}}"
          timeoutSeconds: 30
          command: ["hey -z 2s -q 5 -c 1 {{target}}"]
      """
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the load test target received requests from hey
    And the load tester's log shows the command for "podinfo" in the application's namespace

  Scenario: The canary's HorizontalPodAutoscaler is carried to the primary
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      autoscale: {minReplicas: 2, maxReplicas: 4}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And version "1.0.0" has been rolled out to every cluster
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And in every cluster of the waves the HorizontalPodAutoscaler "podinfo" scales Deployment "podinfo" from 2 to 4 replicas
    And in every cluster of the waves the HorizontalPodAutoscaler "podinfo-primary" scales Deployment "podinfo-primary" from 2 to 4 replicas

  # Healthy metrics: caught are a mesh metrics exporter that serves no
  # series, or series the provider's built-in query does not match (Flagger
  # halts on "no values found" and rolls back), and flotilla rendering the
  # built-in checks so that healthy traffic fails them (the success rate as
  # a fraction, the duration in seconds, min and max swapped). Failing
  # metrics: caught are flotilla dropping the analysis' metrics or their
  # thresholds, rendering them for another provider than the routing's, a
  # rollback that stops at the first cluster's wave or leaves the new image
  # in a workload. The istio rows run where Flagger's own mesh provider is
  # gatewayapi (c1): a Canary rendered without its provider would be routed
  # and measured as a Gateway API one there (no VirtualService to watch);
  # Istio's check reads the destination proxies' istio_requests_total of
  # the canary's workload, so a failing istio row catches, besides, an
  # exporter or a Canary whose workload label the query does not match.
  Scenario Outline: Flagger routes a canary through <provider>'s objects, step by step, on <health> metrics
    Given the "<provider>" CRDs are installed in clusters "c1,c2"
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: canary
      provider: <provider>
      iterations: null
      trafficRouting:
        canaryStrategy: {stepWeight: 30, maxWeight: 60}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
          - {name: request-duration, interval: 30s, thresholdRange: {max: 500}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the <kind> "podinfo" is watched in cluster "c1"
    And the mesh reports the workload "podinfo" <health>
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" <outcome>
    And the primary in every cluster runs version "<running>" by digest
    And no workload in any cluster runs version "<replaced>"
    And in cluster "c1" the canary's weight went <weights> and back to 0
    And Flagger of cluster "c1" <judged>

    Examples:
      | provider | kind           | health  | outcome        | running | replaced | weights | judged                                   |
      | linkerd  | TrafficSplit   | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check                |
      | linkerd  | TrafficSplit   | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate"    |
      | contour  | HTTPProxy      | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check                |
      | contour  | HTTPProxy      | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate"    |
      | traefik  | TraefikService | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check                |
      | traefik  | TraefikService | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate"    |
      | kuma     | TrafficRoute   | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check                |
      | kuma     | TrafficRoute   | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate"    |
      | istio    | VirtualService | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check                |
      | istio    | VirtualService | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate"    |

  # Caught as in the outline above; besides, for nginx the metrics are
  # counted per Ingress: a canary Ingress whose requests nginx would not
  # label as the canary's, or a query of the wrong Ingress, finds no values.
  Scenario Outline: Flagger routes a canary through nginx's canary Ingress, step by step, on <health> metrics
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: canary
      provider: nginx
      iterations: null
      trafficRouting:
        ingressRef: {name: podinfo}
        canaryStrategy: {stepWeight: 30, maxWeight: 60}
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
          - {name: request-duration, interval: 30s, thresholdRange: {max: 500}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And an Ingress "podinfo" routes "podinfo.example.com" to the workload's service in every cluster of the waves
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the Ingress "podinfo-canary" is watched in cluster "c1"
    And the mesh reports the workload "podinfo" <health>
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" <outcome>
    And the primary in every cluster runs version "<running>" by digest
    And no workload in any cluster runs version "<replaced>"
    And in cluster "c1" the canary's weight went <weights> and back to 0
    And Flagger of cluster "c1" <judged>

    Examples:
      | health  | outcome        | running | replaced | weights | judged                                |
      | healthy | succeeds       | 1.1.0   | 1.0.0    | 30, 60  | passed every metric check             |
      | failing | is rolled back | 1.0.0   | 1.1.0    | 30      | halted the analysis on "success rate" |

  # Flagger's kubernetes provider has no mesh and no weights: blue/green
  # only, for a number of iterations, while the apex Service keeps
  # selecting the primary; its built-in checks read the application's own
  # request histogram, http_request_duration_seconds of the target's pods
  # (Flagger's observers/http.go), whatever mesh the cluster's Flagger was
  # started for (gatewayapi in c1). Healthy metrics: caught are an exporter
  # whose pod label the query's "<target>-<hash>-<id>" does not match, or
  # that serves no such histogram (Flagger halts on "no values found" and
  # rolls back), flotilla rendering the thresholds so that healthy traffic
  # fails them, or rendering the Canary without its provider (c1's Flagger
  # would route it through a Gateway API HTTPRoute its cluster lacks).
  # Failing metrics: caught are flotilla dropping a blue/green analysis'
  # metrics (its iterations then pass unchecked and the new version is
  # promoted), and a rollback that stops at the first cluster's wave or
  # leaves the new image in a workload.
  Scenario Outline: Flagger runs a blue-green canary on plain Services, the kubernetes provider, on <health> metrics
    Given flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with delivery:
      """
      strategy: blueGreen
      provider: kubernetes
      iterations: 3
      trafficAnalysis:
        metrics:
          - {name: request-success-rate, interval: 30s, thresholdRange: {min: 99}}
          - {name: request-duration, interval: 30s, thresholdRange: {max: 500}}
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the application's own metrics report the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the application's own metrics report the workload "podinfo" <health>
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" <outcome>
    And the primary in every cluster runs version "<running>" by digest
    And no workload in any cluster runs version "<replaced>"
    And Flagger of cluster "c1" <judged>

    # Both passed on the fleet (17:13, 21.6 s; 17:25, 27.7 s).
    Examples:
      | health  | outcome        | running | replaced | judged                                |
      | healthy | succeeds       | 1.1.0   | 1.0.0    | passed every metric check             |
      | failing | is rolled back | 1.0.0   | 1.1.0    | halted the analysis on "success rate" |

  # Kurator's rollout example (seeds 001), pasted as it is but for the
  # intervals (1s here, not 90s) and the load test's target; Flagger calls
  # the load tester flotilla installs (testLoader) by its Service's name.
  Scenario: Kurator's rollout block rolls out on Istio, load tested by the load tester flotilla installs
    Given the "istio" CRDs are installed in clusters "c1,c2"
    And a load test target
    And flotilla serving the application "podinfo" that tracks "demo/podinfo" on track "MinorVersion" in waves "c1" then "c2" with Kurator's rollout block:
      """
      workload:
        apiVersion: apps/v1
        name: podinfo
        kind: Deployment
        namespace: "{{namespace}}"
      serviceName: podinfo
      port: 9898
      testLoader: true
      trafficRoutingProvider: istio
      rolloutPolicy:
        trafficRouting:
          timeoutSeconds: 60
          gateways:
          - istio-system/public-gateway
          hosts:
          - backend.webapp
          canaryStrategy:
            stepWeight: 10
            maxWeight: 50
        trafficAnalysis:
          checkIntervalSeconds: 1
          checkFailedTimes: 2
          metrics:
          - name: request-success-rate
            intervalSeconds: 90
            thresholdRange:
              min: 99
          - name: request-duration
            intervalSeconds: 90
            thresholdRange:
              max: 500
          webhooks:
            timeoutSeconds: 60
            command:
            - "hey -z 1m -q 10 -c 2 {{target}}"
        rolloutTimeoutSeconds: 600
      """
    And the workload "podinfo" runs in every cluster of the waves
    And the Service of the load tester flotilla installs for "podinfo" reaches the fleet's load tester in clusters "c1,c2"
    And the mesh reports the workload "podinfo" healthy
    And version "1.0.0" has been rolled out to every cluster
    And the VirtualService "podinfo" is watched in cluster "c1"
    When version "1.1.0" is pushed
    Then the rollout of "1.1.0" succeeds
    And the primary in every cluster runs version "1.1.0" by digest
    And in cluster "c1" the canary's weight went 10, 20, 30, 40, 50 and back to 0
    And the load test target received requests from hey
    And in every cluster of the waves the VirtualService "podinfo" serves the hosts "backend.webapp"
