package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func TestParseErrors(t *testing.T) {
	dir := testDir(t)
	tests := []struct {
		name string
		doc  string
		want string // the whole error message
	}{{
		name: "unknown top-level field",
		doc:  "serverr: {}\n",
		want: `parsing config: line 1: unknown field "serverr"`,
	}, {
		name: "unknown nested fields, all reported with lines and paths",
		doc: sections{applications: `
applications:
  - name: podinfo
    image: registry.example.com/demo/podinfo
    workload: {name: podinfo}
    service: {port: 9898, protocol: http}
    delivery:
      webhooks:
        - {name: a, url: 'http://a/', attempts: 3}
      trafficRouting:
        canaryStrategy: {stepweight: 10}
`}.doc(),
		want: `parsing config: line 18: applications[0].service: unknown field "protocol"
line 21: applications[0].delivery.webhooks[0]: unknown field "attempts"
line 23: applications[0].delivery.trafficRouting.canaryStrategy: unknown field "stepweight" (did you mean "stepWeight"?)`,
	}, {
		name: "field matched case-sensitively",
		doc:  "server: {dataDIR: x}\n",
		want: `parsing config: line 1: server: unknown field "dataDIR" (did you mean "dataDir"?)`,
	}, {
		name: "SecretValue is not a field",
		doc:  "receivers: [{name: r, type: github, secretValue: hunter2}]\n",
		want: `parsing config: line 1: receivers[0]: unknown field "secretValue"`,
	}, {
		name: "bad duration",
		doc:  "applications: [{delivery: {interval: 10x}}]\n",
		want: `parsing config: line 1: applications[0].delivery.interval: invalid duration "10x": want a Go duration such as "10s" or "1m30s"`,
	}, {
		name: "duration as a number",
		doc:  "applications: [{delivery: {interval: 10}}]\n",
		want: `parsing config: line 1: applications[0].delivery.interval: invalid duration "10": want a Go duration such as "10s" or "1m30s"`,
	}, {
		name: "duration as a list",
		doc:  "applications: [{delivery: {interval: [10s]}}]\n",
		want: `parsing config: line 1: applications[0].delivery.interval: want a duration such as "10s", got a list`,
	}, {
		name: "wrong shapes",
		doc: `receivers: {name: r}
fleet:
  clusters: [c1]
  waves: [{clusters: c1}]
applications: [{service: {port: "80"}, delivery: {iterations: 1.5}}]
`,
		want: `parsing config: line 1: receivers: want a list, got a mapping
line 3: fleet.clusters[0]: want a mapping of fields, got a scalar
line 4: fleet.waves[0].clusters: want a list, got a scalar
line 5: applications[0].service.port: want an integer, got "80"
line 5: applications[0].delivery.iterations: want an integer, got "1.5"`,
	}, {
		name: "wrong shapes of the delivery policy",
		doc: `applications:
  - service: {targetPort: {name: http}}
    delivery:
      trafficRouting:
        canaryStrategy: {stepWeights: 10}
        retries: {attempts: three}
        headers: {request: {add: [x]}}
        match: [{headers: {x-canary: insider}}]
        trafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}, outlierDetection: {consecutiveGatewayErrors: -1}}
      trafficAnalysis:
        metrics: [{name: m, thresholdRange: {min: ninety}, intervalSeconds: 1m}]
`,
		want: `parsing config: line 2: applications[0].service.targetPort: want a port number or name, got a mapping
line 5: applications[0].delivery.trafficRouting.canaryStrategy.stepWeights: want a list, got a scalar
line 6: applications[0].delivery.trafficRouting.retries.attempts: want an integer, got "three"
line 7: applications[0].delivery.trafficRouting.headers.request.add: want a mapping, got a list
line 8: applications[0].delivery.trafficRouting.match[0].headers["x-canary"]: want a mapping of fields, got a scalar
line 9: applications[0].delivery.trafficRouting.trafficPolicy.outlierDetection.consecutiveGatewayErrors: want an integer 0..4294967295, got -1
line 11: applications[0].delivery.trafficAnalysis.metrics[0].thresholdRange.min: want a number, got "ninety"
line 11: applications[0].delivery.trafficAnalysis.metrics[0].intervalSeconds: want an integer, got "1m"`,
	}, {
		name: "unknown fields and wrong shapes in the tekton pod template",
		doc: sections{fleet: `
fleet:
  executor: tekton
  tekton:
    cluster: c1
    podTemplate:
      nodeSelecter: {pool: ci}
      tolerations: [{key: dedicated, operator: Exists, effects: NoSchedule}]
      securityContext: {runAsUser: root}
      volumes: [{name: cache, emptyDir: {sizelimit: 1Gi}}, {name: tmp, emptyDir: {sizeLimit: lots}}]
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
`}.doc(),
		want: `parsing config: line 12: fleet.tekton.podTemplate: unknown field "nodeSelecter"
line 13: fleet.tekton.podTemplate.tolerations[0]: unknown field "effects"
line 14: fleet.tekton.podTemplate.securityContext.runAsUser: want an integer, got "root"
line 15: fleet.tekton.podTemplate.volumes[0].emptyDir: unknown field "sizelimit" (did you mean "sizeLimit"?)
line 15: fleet.tekton.podTemplate.volumes[1].emptyDir.sizeLimit: invalid quantity "lots": want a Kubernetes quantity such as "1Gi" or "500m"`,
	}, {
		name: "bool and int",
		doc:  "receivers: [{insecure: yes}]\napplications: [{service: {port: 99999999999}}]\n",
		want: `parsing config: line 1: receivers[0].insecure: want true or false, got "yes"
line 2: applications[0].service.port: integer 99999999999 out of range`,
	}, {
		name: "syntax error",
		doc:  "server:\n  listen: [\n",
		want: "parsing config: yaml: line 2: did not find expected node content",
	}, {
		name: "not a mapping",
		doc:  "- a\n- b\n",
		want: "parsing config: line 1: want a mapping of fields, got a list",
	}, {
		name: "two documents",
		doc:  "server: {}\n---\nserver: {}\n",
		want: "parsing config: line 2: want a single YAML document, found another",
	}, {
		name: "duplicate key",
		doc:  "server: {}\nserver: {}\n",
		want: `parsing config: error converting YAML to JSON: yaml: unmarshal errors:
  line 2: key "server" already set in map`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc), dir)
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if errors.As(err, new(*ValidationError)) {
				t.Errorf("Parse error is a ValidationError, want a parse error")
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAnchors(t *testing.T) {
	dir := testDir(t)
	doc := sections{applications: `
x-delivery: &delivery {interval: 10s, iterations: 2}
applications:
  - name: a
    image: r.example.com/a
    workload: {name: a}
    service: {port: 80}
    delivery: *delivery
  - name: b
    image: r.example.com/b
    workload: {name: b}
    service: {port: 80}
    delivery:
      <<: *delivery
      threshold: 1
`}.doc()
	// A top-level extension field is still an unknown field.
	_, err := Parse([]byte(doc), dir)
	want := `parsing config: line 14: unknown field "x-delivery"`
	if err == nil || err.Error() != want {
		t.Fatalf("Parse = %v, want %s", err, want)
	}

	doc = strings.Replace(doc, "x-delivery: &delivery {interval: 10s, iterations: 2}\n", "", 1)
	doc = strings.Replace(doc, "delivery: *delivery", "delivery: &delivery {interval: 10s, iterations: 2}", 1)
	c, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := []Delivery{c.Applications[0].Delivery, c.Applications[1].Delivery}
	if got[1].Interval != got[0].Interval || got[1].Iterations != 2 || got[1].Threshold != 1 {
		t.Errorf("merged deliveries = %+v", got)
	}
}

// TestParseTektonPodTemplate: fleet.tekton.podTemplate is Tekton's own pod
// template, Kubernetes' field names and shapes (inline volume sources,
// quantities, key selectors) included.
func TestParseTektonPodTemplate(t *testing.T) {
	dir := testDir(t)
	doc := sections{fleet: `
fleet:
  executor: tekton
  tekton:
    cluster: c1
    podTemplate:
      nodeSelector: {kubernetes.io/os: linux, node-pool: ci}
      tolerations:
        - {key: dedicated, operator: Equal, value: ci, effect: NoSchedule}
        - {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 60}
      securityContext: {runAsNonRoot: true, runAsUser: 65532, fsGroup: 65532}
      imagePullSecrets: [{name: regcred}]
      priorityClassName: ci-low
      env: [{name: GIT_TOKEN, valueFrom: {secretKeyRef: {name: git, key: token}}}]
      volumes: [{name: cache, emptyDir: {sizeLimit: 1Gi}}]
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
`}.doc()
	c, err := Parse([]byte(doc), dir)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &pod.Template{
		NodeSelector: map[string]string{"kubernetes.io/os": "linux", "node-pool": "ci"},
		Tolerations: []corev1.Toleration{
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ci", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](60)},
		},
		SecurityContext:   &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
		ImagePullSecrets:  []corev1.LocalObjectReference{{Name: "regcred"}},
		PriorityClassName: ptr.To("ci-low"),
		Env: []corev1.EnvVar{{Name: "GIT_TOKEN", ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "git"}, Key: "token"}}}},
		Volumes: pod.Volumes{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}}},
	}
	if diff := cmp.Diff(want, c.Fleet.Tekton.PodTemplate, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("podTemplate (-want +got):\n%s", diff)
	}
}
