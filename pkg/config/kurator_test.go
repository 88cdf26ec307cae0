package config

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// kuratorRollout is the rollout block of Kurator's rollout-demo
// Application (seed 001), pasted into an application as it is.
const kuratorRollout = `
applications:
  - name: backend
    image: ghcr.io/stefanprodan/podinfo
    port: 9898
    rolloutPolicy:
      rolloutTimeoutSeconds: 600
      trafficAnalysis:
        checkFailedTimes: 2
        checkIntervalSeconds: 90
        metrics:
        - intervalSeconds: 90
          name: request-success-rate
          thresholdRange:
            min: 99
        - intervalSeconds: 90
          name: request-duration
          thresholdRange:
            max: 500
        webhooks:
          command:
          - hey -z 1m -q 10 -c 2 http://backend-canary.webapp:9898/
          timeoutSeconds: 60
      trafficRouting:
        canaryStrategy:
          maxWeight: 50
          stepWeight: 10
        gateways:
        - istio-system/public-gateway
        hosts:
        - backend.webapp
        timeoutSeconds: 60
    serviceName: backend
    testLoader: true
    trafficRoutingProvider: istio
    workload:
      apiVersion: apps/v1
      kind: Deployment
      name: backend
      namespace: webapp
`

// Kurator's rollout block means what its fields mean in flotilla's names.
func TestKuratorRolloutBlock(t *testing.T) {
	dir := testDir(t)
	c, err := Parse([]byte(sections{applications: kuratorRollout}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
	a := c.Applications[0]
	d := a.Delivery
	got := []any{a.Namespace, a.Service.Name, a.Service.Port, d.Provider, d.TestLoader, d.Strategy,
		d.Interval.String(), d.Threshold, d.ProgressDeadline.String(), d.TrafficRouting.CanaryStrategy.StepWeight, len(d.TrafficAnalysis.Metrics)}
	want := []any{"webapp", "backend", int32(9898), ProviderIstio, true, StrategyCanary, "1m30s", 2, "10m0s", 10, 2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// A name set twice to different values, and what flotilla cannot honour,
// are problems naming the field.
func TestKuratorConflicts(t *testing.T) {
	dir := testDir(t)
	for _, tc := range []struct {
		name, app string
		want      []Problem
	}{
		{"apiVersion", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo, apiVersion: apps/v1beta1}
    service: {port: 9898}
`, []Problem{{"applications[0].workload.apiVersion", `Flagger targets apps/v1 Deployments and DaemonSets; got "apps/v1beta1"`}}},
		{"namespaces", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    namespace: shop
    workload: {name: podinfo, namespace: webapp}
    service: {port: 9898}
`, []Problem{{"applications[0].workload.namespace", `"webapp" differs from namespace "shop" (Kurator's workload.namespace is flotilla's namespace): set one`}}},
		{"service", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898, name: web}
    serviceName: backend
    port: 8080
`, []Problem{
			{"applications[0].serviceName", `"backend" differs from service.name "web" (Kurator's serviceName is service.name): set one`},
			{"applications[0].port", `8080 differs from service.port 9898 (Kurator's port is service.port): set one`},
		}},
		{"both policies", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    delivery: {interval: 1m}
    rolloutPolicy: {rolloutTimeoutSeconds: 600}
`, []Problem{{"applications[0].rolloutPolicy", "set either delivery or rolloutPolicy (Kurator's name for it), not both"}}},
		{"providers", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    delivery: {provider: istio}
    trafficRoutingProvider: kuma
`, []Problem{{"applications[0].trafficRoutingProvider", `"kuma" differs from the delivery's provider: set one`}}},
		{"a problem in rolloutPolicy", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    rolloutPolicy: {rolloutTimeoutSeconds: 600, trafficRouting: {timeoutSeconds: 60}}
`, []Problem{{"applications[0].rolloutPolicy.trafficRouting.timeoutSeconds", "the kubernetes provider does not apply timeout, only istio, contour or gatewayapi; remove it, or use one of those providers"}}},
		{"kanary", `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898}
    validation:
      validationPeriod: 15m
      noUpdate: true
      items:
      - manual: {statusAfterDeadline: none, status: valid}
`, []Problem{
			{"applications[0].validation.noUpdate", "true is not supported: Kanary's noUpdate validates a canary without promoting it, and a Flagger canary that passes is promoted (use a manual validation with statusAfterDeadline: none to hold it)"},
			{"applications[0].validation.items[0].manual.status", "is decided at run time here: `flotilla approve` (or --reject) the rollout instead of writing \"valid\" into the config"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(sections{applications: tc.app}.doc()), dir)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Parse: %v, want a ValidationError", err)
			}
			if diff := cmp.Diff(tc.want, verr.Problems); diff != "" {
				t.Errorf("problems (-want +got)\n%s", diff)
			}
		})
	}
}

// Kanary's validation block, as its README shows it, is accepted as it is.
func TestKanaryValidationBlock(t *testing.T) {
	dir := testDir(t)
	_, err := Parse([]byte(sections{applications: app + `    validation:
      validationPeriod: 15m
      noUpdate: false
      items:
      - manual:
          statusAfterDeadline: none
      - labelWatch:
          deploymentInvalidationLabels:
            validation: "failed"
`}.doc()), dir)
	if err != nil {
		t.Fatal(err)
	}
}
