package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	istiov1alpha1 "github.com/fluxcd/flagger/pkg/apis/istio/common/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// delivery returns an applications section of one valid application whose
// delivery is the given YAML (a mapping, indented as delivery's fields).
func delivery(yaml string) sections {
	return sections{applications: app + "    delivery:\n" + yaml}
}

const d = "applications[0].delivery"

func TestValidateDelivery(t *testing.T) {
	dir := testDir(t)
	tests := []struct {
		name string
		doc  sections
		want []Problem
	}{
		// strategies and providers
		{
			name: "every strategy with a provider that supports it",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {strategy: canary, provider: istio}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {strategy: abTesting, provider: contour, trafficRouting: {match: [{cookie: canary}]}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {strategy: blueGreen, provider: linkerd}}
`},
		}, {
			name: "unknown provider",
			doc:  delivery("      provider: envoy\n"),
			want: []Problem{{d + ".provider", "unknown provider \"envoy\"; want one of " + strings.Join(Providers, ", ")}},
		}, {
			name: "a Kurator canary on the kubernetes provider",
			doc:  delivery("      trafficRouting: {canaryStrategy: {stepWeight: 10, maxWeight: 50}}\n"),
			want: []Problem{{d + ".trafficRouting.canaryStrategy", "the kubernetes provider supports blue/green only; use a mesh or ingress provider for weighted canaries"}},
		}, {
			name: "canary named without weights on the kubernetes provider",
			doc:  delivery("      strategy: canary\n"),
			want: []Problem{{d + ".strategy", "the kubernetes provider supports blue/green only; use a mesh or ingress provider for weighted canaries"}},
		}, {
			name: "A/B testing on kuma",
			doc:  delivery("      provider: kuma\n      trafficRouting: {match: [{headers: {x-canary: {exact: insider}}}]}\n"),
			want: []Problem{{d + ".trafficRouting.match", "Flagger runs A/B testing with istio, nginx, contour or gatewayapi, not kuma; use one of those providers, or strategy canary"}},
		}, {
			name: "strategy fields of another strategy",
			doc: delivery(`      strategy: blueGreen
      provider: istio
      trafficRouting:
        canaryStrategy: {stepWeight: 10}
        match: [{cookie: canary}]
`),
			want: []Problem{
				{d + ".trafficRouting.canaryStrategy", "only the canary strategy shifts traffic by weight; remove canaryStrategy, or set strategy: canary"},
				{d + ".trafficRouting.match", "only A/B testing routes requests by match; remove it, or set strategy: abTesting"},
			},
		}, {
			name: "A/B testing without match, canary with iterations",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {strategy: abTesting, provider: istio}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {strategy: canary, provider: istio, iterations: 5}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {analysisTimes: 5, canaryStrategy: {}}}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficRouting.match", "required for A/B testing: the headers or cookies of the requests that go to the canary"},
				{"applications[1].delivery.iterations", "a canary advances by stepWeight, not by iterations; remove it, or use strategy blueGreen or abTesting"},
				{"applications[2].delivery.trafficRouting.analysisTimes", "a canary advances by stepWeight, not by iterations; remove it, or use strategy blueGreen or abTesting"},
			},
		},
		// Kurator's names and flotilla's
		{
			name: "both names, same values",
			doc: delivery(`      provider: istio
      trafficRoutingProvider: istio
      interval: 90s
      threshold: 2
      progressDeadline: 10m
      rolloutTimeoutSeconds: 600
      trafficAnalysis: {checkIntervalSeconds: 90, checkFailedTimes: 2}
`),
		}, {
			name: "both names, different values",
			doc: delivery(`      provider: istio
      trafficRoutingProvider: kuma
      interval: 1m
      iterations: 3
      threshold: 2
      progressDeadline: 10m
      rolloutTimeoutSeconds: 60
      trafficRouting: {analysisTimes: 4, timeout: 10s, timeoutSeconds: 20}
      trafficAnalysis:
        checkIntervalSeconds: 90
        checkFailedTimes: 3
        metrics: [{name: request-duration, interval: 1m, intervalSeconds: 30, thresholdRange: {max: 500}}]
        webhooks: {url: 'http://lt.test/', command: [hey], timeout: 5s, timeoutSeconds: 6}
`),
			want: []Problem{
				{d + ".trafficRoutingProvider", "conflicts with " + d + ".provider (istio); set only one of them"},
				{d + ".trafficAnalysis.checkIntervalSeconds", "conflicts with " + d + ".interval (1m0s); set only one of them"},
				{d + ".trafficAnalysis.checkFailedTimes", "conflicts with " + d + ".threshold (2); set only one of them"},
				{d + ".trafficRouting.analysisTimes", "conflicts with " + d + ".iterations (3); set only one of them"},
				{d + ".rolloutTimeoutSeconds", "conflicts with " + d + ".progressDeadline (10m0s); set only one of them"},
				{d + ".trafficRouting.timeoutSeconds", "conflicts with " + d + ".trafficRouting.timeout (10s); set only one of them"},
				{d + ".trafficAnalysis.metrics[0].intervalSeconds", "conflicts with " + d + ".trafficAnalysis.metrics[0].interval (1m0s); set only one of them"},
				{d + ".trafficAnalysis.webhooks.timeoutSeconds", "conflicts with " + d + ".trafficAnalysis.webhooks.timeout (5s); set only one of them"},
			},
		}, {
			name: "problems name the field the user wrote",
			doc: delivery(`      trafficRoutingProvider: nope
      rolloutTimeoutSeconds: -5
      trafficRouting: {analysisTimes: -1}
      trafficAnalysis: {checkIntervalSeconds: -1, checkFailedTimes: -2}
`),
			want: []Problem{
				{d + ".trafficRoutingProvider", `unknown provider "nope"; want one of ` + strings.Join(Providers, ", ")},
				{d + ".trafficAnalysis.checkIntervalSeconds", "must be at least 1s, got -1s"},
				{d + ".trafficRouting.analysisTimes", "must be at least 1, got -1"},
				{d + ".trafficAnalysis.checkFailedTimes", "must be at least 1, got -2"},
				{d + ".rolloutTimeoutSeconds", "must be at least 1s, got -5s"},
			},
		},
		// traffic routing
		{
			name: "routing fields the provider does not apply",
			doc: delivery(`      provider: linkerd
      trafficRouting:
        timeoutSeconds: 60
        gateways: [istio-system/gw]
        hosts: [a.example.com]
        retries: {attempts: 3}
        headers: {request: {add: {x: y}}}
        corsPolicy: {allowOrigin: ['*']}
        trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
        delegation: true
        uriMatch: [{uri: {prefix: /}}]
        protocol: http
        ingressRef: {name: web}
        mirror: true
        mirrorWeight: 10
`),
			want: []Problem{
				{d + ".trafficRouting.timeoutSeconds", "the linkerd provider does not apply timeout, only istio, contour or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.gateways", "the linkerd provider does not apply gateways, only istio or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.hosts", "the linkerd provider does not apply hosts, only istio or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.retries", "the linkerd provider does not apply retries, only istio or contour; remove it, or use one of those providers"},
				{d + ".trafficRouting.headers", "the linkerd provider does not apply headers, only istio or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.corsPolicy", "the linkerd provider does not apply corsPolicy, only istio; remove it, or use one of those providers"},
				{d + ".trafficRouting.trafficPolicy", "the linkerd provider does not apply trafficPolicy, only istio; remove it, or use one of those providers"},
				{d + ".trafficRouting.delegation", "the linkerd provider does not apply delegation, only istio; remove it, or use one of those providers"},
				{d + ".trafficRouting.uriMatch", "the linkerd provider does not apply uriMatch, only istio, contour or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.protocol", "the linkerd provider does not apply protocol, only kuma; remove it, or use one of those providers"},
				{d + ".trafficRouting.ingressRef", "the linkerd provider does not apply ingressRef, only nginx; remove it, or use one of those providers"},
				{d + ".trafficRouting.mirror", "the linkerd provider does not apply mirror, only istio or gatewayapi; remove it, or use one of those providers"},
				{d + ".trafficRouting.mirrorWeight", "the linkerd provider does not apply mirrorWeight, only istio; remove it, or use one of those providers"},
				{d + ".trafficRouting.delegation", "a delegate VirtualService has no gateways or hosts of its own (the delegating one has them); remove gateways and hosts, or delegation"},
			},
		}, {
			name: "Kurator's kuma example with a timeout Kuma ignores",
			doc:  delivery("      provider: kuma\n      trafficRouting: {protocol: http, timeoutSeconds: 60, canaryStrategy: {maxWeight: 50, stepWeight: 10}}\n"),
			want: []Problem{{d + ".trafficRouting.timeoutSeconds", "the kuma provider does not apply timeout, only istio, contour or gatewayapi; remove it, or use one of those providers"}},
		}, {
			name: "routing values",
			doc: delivery(`      provider: istio
      strategy: canary
      trafficRouting:
        timeout: 1500ms
        gateways: [mesh, 'istio-system/', 'Bad/gw', ok/gw.example]
        hosts: ['', 'a b']
        retries: {attempts: 0, perTryTimeout: soon}
`),
			want: []Problem{
				{d + ".trafficRouting.timeout", "must be a whole number of seconds, at least 1s, got 1.5s"},
				{d + ".trafficRouting.gateways[1]", `invalid gateway "istio-system/": want namespace/name, or a name in the application's namespace`},
				{d + ".trafficRouting.gateways[2]", `invalid gateway "Bad/gw": want namespace/name, or a name in the application's namespace`},
				{d + ".trafficRouting.hosts[0]", `invalid host "": want a host name such as "app.example.com" or "*.example.com"`},
				{d + ".trafficRouting.hosts[1]", `invalid host "a b": want a host name such as "app.example.com" or "*.example.com"`},
				{d + ".trafficRouting.retries.attempts", "must be at least 1, got 0"},
				{d + ".trafficRouting.retries.perTryTimeout", `invalid duration "soon": want a positive Go duration such as "5s"`},
			},
		}, {
			name: "what providers require",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {strategy: canary, provider: nginx}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {strategy: canary, provider: gatewayapi, trafficRouting: {gateways: [mesh]}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {strategy: canary, provider: kuma, trafficRouting: {protocol: udp}}}
  - {name: e, image: r.example.com/e, workload: {name: e}, service: {port: 80}, delivery: {strategy: canary, provider: nginx, trafficRouting: {ingressRef: {name: Web}}}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficRouting.ingressRef", "required by the nginx provider: the name of the Ingress that routes to the service"},
				{"applications[2].delivery.trafficRouting.protocol", `unknown Kuma protocol "udp"; want one of http, http2, grpc, tcp, kafka`},
				{"applications[3].delivery.trafficRouting.ingressRef.name", `invalid name "Web": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
			},
		}, {
			name: "gatewayapi without gateways",
			doc:  delivery("      strategy: canary\n      provider: gatewayapi\n"),
			want: []Problem{{d + ".trafficRouting.gateways", "required by the gatewayapi provider: the Gateways the HTTPRoute attaches to, as namespace/name"}},
		}, {
			name: "canary weights",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {canaryStrategy: {stepWeight: 10, stepWeights: [10, 20]}}}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {canaryStrategy: {stepWeights: [10, 10, 101], maxWeight: 50, stepWeightPromotion: 200}}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {canaryStrategy: {stepWeight: 60}}}}
  - {name: e, image: r.example.com/e, workload: {name: e}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {canaryStrategy: {stepWeight: -1, maxWeight: 120}}}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficRouting.canaryStrategy", "set stepWeight or stepWeights, not both"},
				{"applications[1].delivery.trafficRouting.canaryStrategy.stepWeights[1]", "steps must increase: 10 follows 10"},
				{"applications[1].delivery.trafficRouting.canaryStrategy.stepWeights[2]", "must be a percentage 1..100, got 101"},
				{"applications[1].delivery.trafficRouting.canaryStrategy.maxWeight", "with stepWeights the last step is the maximum weight; remove maxWeight"},
				{"applications[1].delivery.trafficRouting.canaryStrategy.stepWeightPromotion", "must be a percentage 1..100, got 200"},
				{"applications[2].delivery.trafficRouting.canaryStrategy.maxWeight", "is below stepWeight (60), so the canary would never get traffic; raise it"},
				{"applications[3].delivery.trafficRouting.canaryStrategy.stepWeight", "must be a percentage 1..100, got -1"},
				{"applications[3].delivery.trafficRouting.canaryStrategy.maxWeight", "must be a percentage 1..100, got 120"},
			},
		}, {
			name: "A/B matches",
			doc: delivery(`      provider: istio
      trafficRouting:
        match:
          - {}
          - headers: {X-Canary: {exact: a}, x-two: {exact: a, prefix: b}, x-re: {regex: '('}}
          - {cookie: 'a=b', headers: {cookie: {regex: canary}}}
`),
			want: []Problem{
				{d + ".trafficRouting.match[0]", "an empty match sends every request to the canary; give headers, a cookie or sourceLabels"},
				{d + `.trafficRouting.match[1].headers["X-Canary"]`, `invalid header name "X-Canary": want a lower-case HTTP header name`},
				{d + `.trafficRouting.match[1].headers["x-re"].regex`, "invalid RE2 regular expression: error parsing regexp: missing closing ): `(`"},
				{d + `.trafficRouting.match[1].headers["x-two"]`, "set exactly one of exact, prefix, suffix and regex"},
				{d + ".trafficRouting.match[2].cookie", `invalid cookie name "a=b"`},
				{d + ".trafficRouting.match[2].cookie", "set cookie or headers.cookie, not both"},
			},
		}, {
			name: "A/B matches the provider cannot route by",
			doc: sections{applications: `
applications:
  - name: a
    image: r.example.com/a
    workload: {name: a}
    service: {port: 80}
    delivery:
      strategy: abTesting
      provider: nginx
      trafficRouting:
        ingressRef: {name: a}
        match:
          - headers: {x-one: {exact: a}, cookie: {regex: canary}}
          - {headers: {x-two: {prefix: b}}, cookie: other}
  - name: b
    image: r.example.com/b
    workload: {name: b}
    service: {port: 80}
    delivery:
      provider: contour
      trafficRouting: {match: [{headers: {x-one: {regex: a}}, sourceLabels: {app: x}}]}
  - name: c
    image: r.example.com/c
    workload: {name: c}
    service: {port: 80}
    delivery:
      provider: gatewayapi
      trafficRouting: {gateways: [gw], match: [{headers: {x-one: {suffix: a}}}]}
  - name: d
    image: r.example.com/d
    workload: {name: d}
    service: {port: 80}
    delivery:
      provider: gatewayapi
      trafficRouting: {gateways: [gw], timeout: 30s, match: [{headers: {x-one: {exact: a}}}]}
`},
			want: []Problem{
				{`applications[0].delivery.trafficRouting.match[0].headers["cookie"]`, "the nginx provider matches by exact, not regex"},
				{`applications[0].delivery.trafficRouting.match[1].headers["x-two"]`, "the nginx provider matches by exact or regex, not prefix"},
				{`applications[0].delivery.trafficRouting.match[1].headers["x-two"]`, "nginx routes to the canary by one header and one cookie; remove this one"},
				{`applications[0].delivery.trafficRouting.match[1].cookie`, "nginx routes to the canary by one header and one cookie; remove this one"},
				{`applications[1].delivery.trafficRouting.match[0].headers["x-one"]`, "the contour provider matches by exact, prefix or suffix, not regex"},
				{`applications[1].delivery.trafficRouting.match[0].sourceLabels`, "only the istio provider matches by source labels; remove them"},
				{"applications[2].delivery.trafficRouting.timeout", "required for A/B testing on the gatewayapi provider: Flagger writes the route's request timeout at every step, and an empty one is refused by the API server; set it, such as 30s"},
				{`applications[2].delivery.trafficRouting.match[0].headers["x-one"]`, "the gatewayapi provider matches by exact or regex, not suffix"},
			},
		}, {
			name: "mirroring",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {mirrorWeight: 50}}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {mirror: true, mirrorWeight: 101}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {provider: istio, trafficRouting: {mirror: true, match: [{cookie: c}]}}}
  - {name: e, image: r.example.com/e, workload: {name: e}, service: {port: 80}, delivery: {provider: gatewayapi, trafficRouting: {gateways: [gw], mirror: true, mirrorWeight: 50}}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficRouting.mirrorWeight", "takes effect with mirror: true only; set mirror, or remove mirrorWeight"},
				{"applications[1].delivery.trafficRouting.mirrorWeight", "must be 1..100, got 101"},
				{"applications[2].delivery.trafficRouting.mirror", "mirroring precedes canary and blue/green analysis, not A/B testing; remove it, or use strategy canary or blueGreen"},
				{"applications[3].delivery.trafficRouting.mirrorWeight", "the gatewayapi provider does not apply mirrorWeight, only istio; remove it, or use one of those providers"},
			},
		},
		// traffic analysis
		{
			name: "metrics",
			doc: delivery(`      trafficAnalysis:
        primaryReadyThreshold: 0
        canaryReadyThreshold: 101
        metrics:
          - {name: request-success-rate}
          - {name: request-success-rate, interval: 500ms, thresholdRange: {min: 99, max: 90}}
          - {name: errors, thresholdRange: {max: 1}, templateVariables: {a: b}}
          - {name: Bad_Name, thresholdRange: {max: 1}, templateRef: {name: t}}
          - name: both
            thresholdRange: {max: 1}
            templateRef: {name: t}
            customMetric: {query: up}
          - name: custom
            thresholdRange: {max: 1}
            customMetric: {provider: {type: graphite2, address: 'prom:9090', secretRef: {name: ''}}, query: '{{ intervall }}'}
          - {name: empty, thresholdRange: {max: 1}, customMetric: {query: ' '}}
          - {name: ref, thresholdRange: {max: 1}, templateRef: {name: '', namespace: Flagger}}
`),
			want: []Problem{
				{d + ".trafficAnalysis.primaryReadyThreshold", "must be a percentage 1..100, got 0"},
				{d + ".trafficAnalysis.canaryReadyThreshold", "must be a percentage 1..100, got 101"},
				{d + ".trafficAnalysis.metrics[0].thresholdRange", "required: min, max or both; a metric without a range never fails"},
				{d + ".trafficAnalysis.metrics[1].name", `duplicate metric name "request-success-rate" (first used by ` + d + ".trafficAnalysis.metrics[0])"},
				{d + ".trafficAnalysis.metrics[1].interval", "must be at least 1s, got 500ms"},
				{d + ".trafficAnalysis.metrics[1].thresholdRange", "min (99) is above max (90), so the metric always fails"},
				{d + ".trafficAnalysis.metrics[2].name", `"errors" is not one of Flagger's built-in metrics (request-success-rate, request-duration); give a customMetric query or a templateRef`},
				{d + ".trafficAnalysis.metrics[2].templateVariables", "only customMetric and templateRef queries take variables; remove them"},
				{d + ".trafficAnalysis.metrics[3].name", `invalid metric name "Bad_Name": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
				{d + ".trafficAnalysis.metrics[4]", "set customMetric or templateRef, not both"},
				{d + ".trafficAnalysis.metrics[5].customMetric.provider.type", `unknown metric provider "graphite2"; want one of ` + strings.Join(MetricProviderTypes, ", ")},
				{d + ".trafficAnalysis.metrics[5].customMetric.provider.address", `want an http or https URL, got scheme "prom"`},
				{d + ".trafficAnalysis.metrics[5].customMetric.provider.secretRef.name", "required"},
				{d + ".trafficAnalysis.metrics[5].customMetric.query", `invalid query template: template: query:1: function "intervall" not defined`},
				{d + ".trafficAnalysis.metrics[6].customMetric.query", "required: the query, such as a PromQL expression using {{ interval }}"},
				{d + ".trafficAnalysis.metrics[7].templateRef.name", "required"},
				{d + ".trafficAnalysis.metrics[7].templateRef.namespace", `invalid namespace name "Flagger": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`},
			},
		}, {
			name: "load test",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {trafficAnalysis: {webhooks: {command: [hey]}}}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {testLoader: true, trafficAnalysis: {webhooks: {url: 'http://lt/', command: [hey, ' ']}}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {trafficAnalysis: {webhooks: {url: 'lt', timeoutSeconds: -1, command: [hey]}}}}
  - {name: e, image: r.example.com/e, workload: {name: e}, service: {port: 80}, delivery: {trafficAnalysis: {webhooks: {timeout: 5s}}}}
  - {name: ` + strings.Repeat("x", 53) + `, image: r.example.com/f, workload: {name: f}, service: {port: 80}, delivery: {testLoader: true}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficAnalysis.webhooks.url", `required unless testLoader is true: the URL of your load tester, such as "http://flagger-loadtester.test/"; or set testLoader: true to have flotilla install one`},
				{"applications[1].delivery.trafficAnalysis.webhooks.command[1]", "empty command"},
				{"applications[1].delivery.trafficAnalysis.webhooks.url", "testLoader: true sends the commands to the load tester flotilla installs; remove url, or set testLoader: false to use yours"},
				{"applications[2].delivery.trafficAnalysis.webhooks.timeoutSeconds", "must be at least 1ms, got -1s"},
				{"applications[2].delivery.trafficAnalysis.webhooks.url", `want an http or https URL, got scheme ""`},
				{"applications[3].delivery.trafficAnalysis.webhooks.command", "required when url or a timeout is set: the commands the load tester runs"},
				{"applications[4].delivery.testLoader", `the load tester's service would be named "loadtester-` + strings.Repeat("x", 53) + `", longer than 63 characters; shorten the application's name to at most 52`},
			},
		}, {
			name: "session affinity",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {name: a}, service: {port: 80}, delivery: {trafficAnalysis: {sessionAffinity: {cookieName: c}}}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {provider: nginx, strategy: canary, trafficRouting: {ingressRef: {name: b}}, trafficAnalysis: {sessionAffinity: {maxAge: -1}}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {provider: istio, strategy: canary, trafficAnalysis: {sessionAffinity: {cookieName: 'a;b', primaryCookieName: p}}}}
  - {name: e, image: r.example.com/e, workload: {name: e}, service: {port: 80}, delivery: {provider: gatewayapi, strategy: canary, trafficRouting: {gateways: [gw]}, trafficAnalysis: {sessionAffinity: {cookieName: c, primaryCookieName: c}}}}
`},
			want: []Problem{
				{"applications[0].delivery.trafficAnalysis.sessionAffinity", "session affinity keeps users on a weighted canary; remove it, or set strategy: canary"},
				{"applications[0].delivery.trafficAnalysis.sessionAffinity", "the kubernetes provider does not apply session affinity, only istio or gatewayapi; remove it, or use one of those providers"},
				{"applications[1].delivery.trafficAnalysis.sessionAffinity", "the nginx provider does not apply session affinity, only istio or gatewayapi; remove it, or use one of those providers"},
				{"applications[1].delivery.trafficAnalysis.sessionAffinity.cookieName", "required: the cookie that keeps a user on the canary"},
				{"applications[1].delivery.trafficAnalysis.sessionAffinity.maxAge", "must be positive (seconds), got -1"},
				{"applications[2].delivery.trafficAnalysis.sessionAffinity.cookieName", `invalid cookie name "a;b"`},
				{"applications[2].delivery.trafficAnalysis.sessionAffinity.primaryCookieName", "only the gatewayapi provider keeps users on the primary; remove it"},
				{"applications[3].delivery.trafficAnalysis.sessionAffinity.primaryCookieName", "must differ from cookieName"},
			},
		},
		// the rest of the policy
		{
			name: "autoscale",
			doc: sections{applications: `
applications:
  - {name: a, image: r.example.com/a, workload: {kind: DaemonSet, name: a}, service: {port: 80}, delivery: {autoscale: {maxReplicas: 3}}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80}, delivery: {autoscale: {minReplicas: -1}}}
  - {name: c, image: r.example.com/c, workload: {name: c}, service: {port: 80}, delivery: {autoscale: {minReplicas: 5, maxReplicas: 2}}}
`},
			want: []Problem{
				{"applications[0].delivery.autoscale", "a DaemonSet runs one pod per node and cannot be autoscaled; remove autoscale, or use a Deployment"},
				{"applications[1].delivery.autoscale.minReplicas", "must be at least 1, got -1"},
				{"applications[1].delivery.autoscale.maxReplicas", "must be at least minReplicas (-1), got 0"},
				{"applications[2].delivery.autoscale.maxReplicas", "must be at least minReplicas (5), got 2"},
			},
		}, {
			name: "webhooks beyond the basics",
			doc:  delivery("      webhooks: [{name: flotilla-events, url: 'http://a/'}, {name: b, url: 'http://b/', retries: -1}]\n"),
			want: []Problem{
				{d + ".webhooks[0].name", `names starting with "flotilla-" are reserved for the webhooks flotilla adds; rename "flotilla-events"`},
				{d + ".webhooks[1].retries", "must be at least 0, got -1"},
			},
		}, {
			name: "service",
			doc: sections{applications: `
applications:
  - name: a
    image: r.example.com/a
    workload: {name: a}
    service:
      port: 80
      name: 1svc
      portName: HTTP_PORT
      targetPort: 70000
      apex: {labels: {"bad key!": x}}
      canary: {annotations: {"bad key!": x}}
  - {name: b, image: r.example.com/b, workload: {name: b}, service: {port: 80, targetPort: "not a name"}}
`},
			want: []Problem{
				{"applications[0].service.name", `invalid service name "1svc": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')`},
				{"applications[0].service.portName", `invalid port name "HTTP_PORT": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-); must contain at least one letter (a-z)`},
				{"applications[0].service.targetPort", "invalid port 70000: must be between 1 and 65535, inclusive"},
				{`applications[0].service.apex.labels["bad key!"]`, "invalid label key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
				{`applications[0].service.canary.annotations["bad key!"]`, "invalid annotation key: name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"},
				{"applications[1].service.targetPort", `invalid port name "not a name": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.doc.doc()), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
				if c != nil {
					t.Errorf("Parse returned a config with its error")
				}
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeliveryDefaults checks what defaults make of a policy: Kurator's
// names copied into flotilla's, the strategy inferred, each strategy's and
// provider's defaults.
func TestDeliveryDefaults(t *testing.T) {
	dir := testDir(t)
	tests := []struct {
		name string
		doc  string
		want func(*Application)
	}{{
		name: "Kurator's names fill in flotilla's, the strategy follows canaryStrategy",
		doc: `      trafficRoutingProvider: istio
      rolloutTimeoutSeconds: 600
      testLoader: true
      trafficRouting:
        timeoutSeconds: 60
        canaryStrategy: {stepWeight: 10, maxWeight: 50}
      trafficAnalysis:
        checkIntervalSeconds: 90
        checkFailedTimes: 2
        metrics: [{name: request-success-rate, intervalSeconds: 90, thresholdRange: {min: 99}}]
        webhooks: {timeoutSeconds: 60, command: [hey]}
`,
		want: func(a *Application) {
			d := &a.Delivery
			d.Strategy, d.Provider, d.TrafficRoutingProvider = StrategyCanary, ProviderIstio, ProviderIstio
			d.Interval, d.Iterations, d.Threshold, d.ProgressDeadline = Duration{90 * time.Second}, 0, 2, Duration{10 * time.Minute}
			d.RolloutTimeoutSeconds, d.TestLoader = 600, true
			d.TrafficRouting = TrafficRouting{
				Timeout: Duration{time.Minute}, TimeoutSeconds: 60,
				CanaryStrategy: &CanaryStrategy{StepWeight: 10, MaxWeight: 50},
			}
			d.TrafficAnalysis = TrafficAnalysis{
				CheckIntervalSeconds: 90, CheckFailedTimes: 2,
				Metrics:  []Metric{{Name: "request-success-rate", Interval: Duration{90 * time.Second}, IntervalSeconds: 90, ThresholdRange: &ThresholdRange{Min: ptr.To(99.0)}}},
				Webhooks: LoadTest{Timeout: Duration{time.Minute}, TimeoutSeconds: 60, Command: []string{"hey"}},
			}
		},
	}, {
		name: "canary without weights gets 10 up to 50",
		doc:  "      {strategy: canary, provider: linkerd}\n",
		want: func(a *Application) {
			d := &a.Delivery
			d.Strategy, d.Provider, d.Iterations = StrategyCanary, ProviderLinkerd, 0
			d.TrafficRouting.CanaryStrategy = &CanaryStrategy{StepWeight: 10, MaxWeight: 50}
		},
	}, {
		name: "canary by steps keeps them",
		doc:  "      {provider: istio, trafficRouting: {canaryStrategy: {stepWeights: [5, 50]}}}\n",
		want: func(a *Application) {
			d := &a.Delivery
			d.Strategy, d.Provider, d.Iterations = StrategyCanary, ProviderIstio, 0
			d.TrafficRouting.CanaryStrategy = &CanaryStrategy{StepWeights: []int{5, 50}}
		},
	}, {
		name: "match means A/B testing, analysisTimes its iterations",
		doc:  "      {provider: nginx, trafficRouting: {analysisTimes: 3, ingressRef: {name: web}, match: [{cookie: canary}]}}\n",
		want: func(a *Application) {
			d := &a.Delivery
			d.Strategy, d.Provider, d.Iterations = StrategyABTesting, ProviderNGINX, 3
			d.TrafficRouting.AnalysisTimes = 3
			d.TrafficRouting.IngressRef = &IngressRef{Name: "web"}
			d.TrafficRouting.Match = []Match{{Cookie: "canary"}}
		},
	}, {
		name: "kuma speaks http, custom metrics ask the fleet's prometheus, autoscaling starts at 1",
		doc: `      provider: kuma
      trafficRouting: {canaryStrategy: {stepWeight: 20, maxWeight: 40}}
      autoscale: {maxReplicas: 4}
      trafficAnalysis:
        metrics: [{name: m, thresholdRange: {max: 1}, customMetric: {query: up}}]
`,
		want: func(a *Application) {
			d := &a.Delivery
			d.Strategy, d.Provider, d.Iterations = StrategyCanary, ProviderKuma, 0
			d.TrafficRouting = TrafficRouting{Protocol: "http", CanaryStrategy: &CanaryStrategy{StepWeight: 20, MaxWeight: 40}}
			d.Autoscale = &Autoscale{MinReplicas: 1, MaxReplicas: 4}
			d.TrafficAnalysis.Metrics = []Metric{{
				Name: "m", Interval: Duration{time.Minute}, ThresholdRange: &ThresholdRange{Max: ptr.To(1.0)},
				CustomMetric: &CustomMetric{Provider: MetricProvider{Type: "prometheus", Address: DefaultMetricsServer}, Query: "up"},
			}}
		},
	}, {
		name: "an empty policy is blue/green on plain services",
		doc:  "      {}\n",
		want: func(*Application) {},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(delivery(tt.doc).doc()), dir)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := Application{
				Name: "podinfo", Image: "registry.example.com/demo/podinfo", Track: TrackMinorVersion, OnNewVersion: OnNewVersionSupersede, Namespace: "default",
				Workload: Workload{Kind: "Deployment", Name: "podinfo"},
				Service:  Service{Port: 9898, PortDiscovery: ptr.To(true)},
				Delivery: Delivery{
					Strategy: StrategyBlueGreen, Provider: ProviderKubernetes,
					Interval: Duration{time.Minute}, Iterations: 10, Threshold: 5, ProgressDeadline: Duration{10 * time.Minute},
				},
			}
			tt.want(&want)
			if diff := cmp.Diff(want, c.Applications[0]); diff != "" {
				t.Errorf("application (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseServiceAndMatch checks the shapes the policy borrows from
// Kubernetes and Istio: a port given as number or name, header matches.
func TestParseServiceAndMatch(t *testing.T) {
	dir := testDir(t)
	doc := sections{applications: `
applications:
  - name: a
    image: r.example.com/a
    workload: {name: a}
    service: {port: 80, targetPort: 8080, portDiscovery: false}
    delivery:
      provider: istio
      trafficRouting:
        match: [{headers: {x-canary: {exact: insider}}, sourceLabels: {app: web}}]
  - name: b
    image: r.example.com/b
    workload: {name: b}
    service: {port: 80, targetPort: http}
`}.doc()
	c, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := []any{c.Applications[0].Service, c.Applications[1].Service.TargetPort, c.Applications[0].Delivery.TrafficRouting.Match}
	want := []any{
		Service{Port: 80, TargetPort: ptr.To(intstr.FromInt32(8080)), PortDiscovery: ptr.To(false)},
		ptr.To(intstr.FromString("http")),
		[]Match{{Headers: map[string]istiov1alpha1.StringMatch{"x-canary": {Exact: "insider"}}, SourceLabels: map[string]string{"app": "web"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExampleReferencePolicy parses the commented Kurator-style policy at
// the end of config/example.yaml, so that the reference stays valid.
func TestExampleReferencePolicy(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(data), "#  - name: backend\n")
	if !ok {
		t.Fatal("config/example.yaml has no commented reference policy")
	}
	ref, _, _ = strings.Cut(ref, "\n\n") // the block ends at a blank line
	var doc strings.Builder
	doc.WriteString("applications:\n  - name: backend\n")
	for _, line := range strings.Split(strings.TrimRight(ref, "\n"), "\n") {
		doc.WriteString(strings.TrimPrefix(line, "#") + "\n")
	}
	s := sections{applications: doc.String()}
	c, err := Parse([]byte(s.doc()), testDir(t))
	if err != nil {
		t.Fatalf("Parse:\n%s\n%v", doc.String(), err)
	}
	if d := c.Applications[0].Delivery; d.Strategy != StrategyCanary || d.Provider != ProviderIstio || d.Autoscale == nil {
		t.Errorf("delivery = %+v, want an autoscaled canary on istio", d)
	}
}

func TestStepDeadline(t *testing.T) {
	minute := func(n int) Duration { return Duration{Duration: time.Duration(n) * time.Minute} }
	tests := []struct {
		name string
		d    Delivery
		want time.Duration
	}{
		{"set", Delivery{Deadline: minute(7), Interval: minute(1), Iterations: 10}, 7 * time.Minute},
		// (10 iterations + 5 threshold + 3) x 1m + 10m + 2m
		{"blue/green", Delivery{Strategy: StrategyBlueGreen, Interval: minute(1), Iterations: 10, Threshold: 5, ProgressDeadline: minute(10)}, 30 * time.Minute},
		// (5 weight steps + 2 promotion steps + 1 + 3) x 1m + 1m + 2m
		{"canary", Delivery{
			Strategy: StrategyCanary, Interval: minute(1), Threshold: 1, ProgressDeadline: minute(1),
			TrafficRouting: TrafficRouting{CanaryStrategy: &CanaryStrategy{StepWeight: 10, MaxWeight: 50, StepWeightPromotion: 50}},
		}, 14 * time.Minute},
		{"canary with step weights", Delivery{
			Strategy: StrategyCanary, Interval: minute(1), Threshold: 1,
			TrafficRouting: TrafficRouting{CanaryStrategy: &CanaryStrategy{StepWeights: []int{1, 10, 50}}},
		}, 9 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.StepDeadline(); got != tt.want {
				t.Errorf("StepDeadline() = %s, want %s", got, tt.want)
			}
		})
	}
}
