package chart

import (
	"encoding/base64"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/fleetrollout"
	"github.com/flotilla-cd/flotilla/pkg/render"
)

// fromYAML parses a YAML literal as JSON values (numbers float64), the
// form plain() gives a rendered object's fields.
func fromYAML(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// plain is v through JSON, so that it compares with fromYAML's values.
func plain(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// podSpec is the rendered Deployment's pod spec and its containers by name.
func podSpec(t *testing.T, file string) (map[string]any, map[string]map[string]any) {
	t.Helper()
	d := renderChart(t, file)["Deployment/flotilla"]
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	containers := map[string]map[string]any{}
	for _, list := range []string{"initContainers", "containers"} {
		cs, _ := pod[list].([]any)
		for _, c := range cs {
			cm, _ := c.(map[string]any)
			containers[cm["name"].(string)] = cm
		}
	}
	return pod, containers
}

// The security contexts: restricted by default; values merge into them and
// null drops a key, which is how OpenShift's random user ids are let in
// (values-all.yaml).
func TestSecurityContexts(t *testing.T) {
	restricted := `{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}`
	for _, tt := range []struct {
		file           string
		pod, container string
	}{{
		file:      "testdata/values-minimal.yaml",
		pod:       `{runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: {type: RuntimeDefault}}`,
		container: restricted,
	}, {
		file:      "testdata/values-all.yaml",
		pod:       `{runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}`,
		container: `{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}, runAsNonRoot: true}`,
	}} {
		pod, containers := podSpec(t, tt.file)
		if diff := cmp.Diff(fromYAML(t, tt.pod), plain(t, pod["securityContext"])); diff != "" {
			t.Errorf("values %q: pod securityContext (-want +got)\n%s", tt.file, diff)
		}
		for _, name := range []string{"config-check", "flotilla"} {
			if diff := cmp.Diff(fromYAML(t, tt.container), plain(t, containers[name]["securityContext"])); diff != "" {
				t.Errorf("values %q: %s's securityContext (-want +got)\n%s", tt.file, name, diff)
			}
		}
	}
}

// extraEnv and extraVolumeMounts reach both containers (the config check
// resolves the config's secrets and files too); extraVolumes the pod.
func TestExtraEnvAndVolumes(t *testing.T) {
	for _, tt := range []struct {
		file    string
		env     string
		volumes string // the pod's volumes past the chart's
	}{{
		file:    "testdata/values-minimal.yaml",
		env:     `null`,
		volumes: `null`,
	}, {
		file: "testdata/values-all.yaml",
		env: `
- {name: HTTPS_PROXY, value: "http://proxy.example.com:3128"}
- {name: FLOTILLA_GIT_TOKEN, valueFrom: {secretKeyRef: {name: flotilla-git, key: token}}}
`,
		volumes: `[{name: git-ssh, secret: {secretName: flotilla-git-ssh, defaultMode: 0400}}]`,
	}} {
		pod, containers := podSpec(t, tt.file)
		for _, name := range []string{"config-check", "flotilla"} {
			if diff := cmp.Diff(fromYAML(t, tt.env), plain(t, containers[name]["env"])); diff != "" {
				t.Errorf("values %q: %s's env (-want +got)\n%s", tt.file, name, diff)
			}
		}
		var extra []any
		for _, v := range pod["volumes"].([]any) {
			switch v.(map[string]any)["name"] {
			case "config", "secrets", "kubeconfigs", "api-token", "data", "tmp", "registry-0", "registry-1":
			default:
				extra = append(extra, v)
			}
		}
		if diff := cmp.Diff(fromYAML(t, tt.volumes), plain(t, extra)); diff != "" {
			t.Errorf("values %q: extra volumes (-want +got)\n%s", tt.file, diff)
		}
	}
}

// registrySecrets: each Secret's .dockerconfigjson mounted in both
// containers (the config check reads the files too) and listed in the
// config's registries.dockerConfigFiles, after what the config lists.
func TestRegistrySecrets(t *testing.T) {
	const file = "testdata/values-all.yaml"
	pod, containers := podSpec(t, file)
	var volumes []any
	for _, v := range pod["volumes"].([]any) {
		if strings.HasPrefix(v.(map[string]any)["name"].(string), "registry-") {
			volumes = append(volumes, v)
		}
	}
	wantVolumes := `
- {name: registry-0, secret: {secretName: regcred, items: [{key: .dockerconfigjson, path: .dockerconfigjson}]}}
- {name: registry-1, secret: {secretName: ghcr-creds, items: [{key: .dockerconfigjson, path: .dockerconfigjson}]}}
`
	if diff := cmp.Diff(fromYAML(t, wantVolumes), plain(t, volumes)); diff != "" {
		t.Errorf("volumes (-want +got)\n%s", diff)
	}
	for _, name := range []string{"config-check", "flotilla"} {
		var mounts []any
		for _, m := range containers[name]["volumeMounts"].([]any) {
			if strings.HasPrefix(m.(map[string]any)["name"].(string), "registry-") {
				mounts = append(mounts, m)
			}
		}
		want := `
- {name: registry-0, mountPath: /etc/flotilla/registries/regcred, readOnly: true}
- {name: registry-1, mountPath: /etc/flotilla/registries/ghcr-creds, readOnly: true}
`
		if diff := cmp.Diff(fromYAML(t, want), plain(t, mounts)); diff != "" {
			t.Errorf("%s's mounts (-want +got)\n%s", name, diff)
		}
	}
	cm := renderChart(t, file)["ConfigMap/flotilla-config"]
	data, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	var cfg struct {
		Registries any `json:"registries"`
	}
	if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
		t.Fatal(err)
	}
	want := `{providers: [aws], dockerConfigFiles: [/etc/flotilla/registries/regcred/.dockerconfigjson, /etc/flotilla/registries/ghcr-creds/.dockerconfigjson]}`
	if diff := cmp.Diff(fromYAML(t, want), plain(t, cfg.Registries)); diff != "" {
		t.Errorf("the config's registries (-want +got)\n%s", diff)
	}
}

// ui.ingress and ui.httpRoute route the UI, the API and / (the UI's
// redirect) to flotilla, apart from the webhooks' Ingress and route.
func TestUIRoutes(t *testing.T) {
	objs := renderChart(t, "testdata/values-all.yaml")
	ing := objs["Ingress/flotilla-ui"]
	if ing == nil {
		t.Fatal("no Ingress/flotilla-ui")
	}
	spec, _, _ := unstructured.NestedMap(ing.Object, "spec")
	backend := `{service: {name: flotilla, port: {name: http}}}`
	want := `
ingressClassName: internal
tls: [{hosts: [flotilla.internal.example.com], secretName: flotilla-internal-tls}]
rules:
- host: flotilla.internal.example.com
  http:
    paths:
    - {path: /, pathType: Exact, backend: ` + backend + `}
    - {path: /api, pathType: Prefix, backend: ` + backend + `}
    - {path: /ui, pathType: Prefix, backend: ` + backend + `}
`
	if diff := cmp.Diff(fromYAML(t, want), plain(t, spec)); diff != "" {
		t.Errorf("Ingress/flotilla-ui spec (-want +got)\n%s", diff)
	}
	if got := ing.GetAnnotations()["nginx.ingress.kubernetes.io/auth-url"]; got == "" {
		t.Errorf("Ingress/flotilla-ui lost its annotations: %v", ing.GetAnnotations())
	}
	route := objs["HTTPRoute/flotilla-ui"]
	if route == nil {
		t.Fatal("no HTTPRoute/flotilla-ui")
	}
	spec, _, _ = unstructured.NestedMap(route.Object, "spec")
	want = `
parentRefs: [{name: internal, namespace: gateways}]
hostnames: [flotilla.internal.example.com]
rules:
- matches:
  - {path: {type: PathPrefix, value: /ui}}
  - {path: {type: PathPrefix, value: /api}}
  - {path: {type: Exact, value: /}}
  backendRefs: [{name: flotilla, port: 8080}]
`
	if diff := cmp.Diff(fromYAML(t, want), plain(t, spec)); diff != "" {
		t.Errorf("HTTPRoute/flotilla-ui spec (-want +got)\n%s", diff)
	}
}

// The claim outlives `helm uninstall` unless persistence.keepOnUninstall is
// off; the kustomize base does not carry Helm's annotation.
func TestClaimKeptOnUninstall(t *testing.T) {
	for _, tt := range []struct {
		file string
		want map[string]string
	}{
		{"testdata/values-minimal.yaml", map[string]string{"helm.sh/resource-policy": "keep"}},
		{"testdata/values-all.yaml", nil},
	} {
		pvc := renderChart(t, tt.file)["PersistentVolumeClaim/flotilla-data"]
		if diff := cmp.Diff(tt.want, pvc.GetAnnotations()); diff != "" {
			t.Errorf("values %q: the claim's annotations (-want +got)\n%s", tt.file, diff)
		}
	}
	base, err := os.ReadFile(filepath.Join("..", "manifests", "flotilla.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(base), "helm.sh/") {
		t.Errorf("deploy/manifests/flotilla.yaml holds Helm's metadata")
	}
}

// grafanaDashboard.enabled ships deploy/grafana's dashboard in a ConfigMap
// Grafana's sidecar picks up by its label.
func TestGrafanaDashboard(t *testing.T) {
	if _, ok := renderChart(t, "testdata/values-minimal.yaml")["ConfigMap/flotilla-dashboard"]; ok {
		t.Error("the minimal values render the dashboard's ConfigMap; want it off")
	}
	cm := renderChart(t, "testdata/values-all.yaml")["ConfigMap/flotilla-dashboard"]
	if cm == nil {
		t.Fatal("values-all.yaml renders no ConfigMap/flotilla-dashboard")
	}
	if got := cm.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("label grafana_dashboard = %q, want \"1\" (labels %v)", got, cm.GetLabels())
	}
	if diff := cmp.Diff(map[string]string{"grafana_folder": "Delivery"}, cm.GetAnnotations()); diff != "" {
		t.Errorf("annotations (-want +got)\n%s", diff)
	}
	want, err := os.ReadFile(filepath.Join("..", "grafana", "flotilla-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", "flotilla.json")
	if got != strings.TrimRight(string(want), "\n") {
		t.Errorf("the ConfigMap's flotilla.json is not deploy/grafana/flotilla-dashboard.json: run make manifests")
	}
	if !json.Valid([]byte(got)) {
		t.Error("the ConfigMap's flotilla.json is not JSON")
	}
}

// Scale-out mode: the replicas rolled one at a time with a budget and
// spread over nodes, each named by its pod, the NATS credentials mounted
// where the config's server.bus reads them.
func TestScaleOut(t *testing.T) {
	const file = "testdata/values-scaleout.yaml"
	objs := renderChart(t, file)
	d := objs["Deployment/flotilla"].Object
	spec, _, _ := unstructured.NestedMap(d, "spec")
	if diff := cmp.Diff(fromYAML(t, `{type: RollingUpdate, rollingUpdate: {maxUnavailable: 0, maxSurge: 1}}`), plain(t, spec["strategy"])); diff != "" {
		t.Errorf("strategy (-want +got)\n%s", diff)
	}
	if r, _, _ := unstructured.NestedInt64(d, "spec", "replicas"); r != 3 {
		t.Errorf("replicas %d, want 3", r)
	}
	pod, containers := podSpec(t, file)
	for _, name := range []string{"config-check", "flotilla"} {
		if diff := cmp.Diff(fromYAML(t, `[{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]`), plain(t, containers[name]["env"])); diff != "" {
			t.Errorf("%s's env (-want +got)\n%s", name, diff)
		}
		found := false
		for _, m := range containers[name]["volumeMounts"].([]any) {
			if m.(map[string]any)["name"] == "nats" && m.(map[string]any)["mountPath"] == "/etc/flotilla/nats" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s does not mount the NATS credentials", name)
		}
	}
	if _, ok, _ := unstructured.NestedMap(pod, "affinity", "podAntiAffinity"); !ok {
		t.Errorf("no anti-affinity: %v", pod["affinity"])
	}
	for _, v := range pod["volumes"].([]any) {
		if v.(map[string]any)["name"] == "data" && v.(map[string]any)["emptyDir"] == nil {
			t.Errorf("the data volume is not an emptyDir: %v", v)
		}
	}
	if m, _, _ := unstructured.NestedInt64(objs["PodDisruptionBudget/flotilla"].Object, "spec", "maxUnavailable"); m != 1 {
		t.Errorf("the budget's maxUnavailable %d, want 1", m)
	}
	raw, _, _ := unstructured.NestedString(objs["ConfigMap/flotilla-config"].Object, "data", "config.yaml")
	var cfg struct {
		Server struct {
			Bus           map[string]any `json:"bus"`
			FleetRollouts map[string]any `json:"fleetRollouts"`
		} `json:"server"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	want := `{url: "nats://nats.nats:4222", credentialsFile: /etc/flotilla/nats/nats.creds, stream: FLOTILLA, replicas: 3, partitions: 16}`
	if diff := cmp.Diff(fromYAML(t, want), plain(t, cfg.Server.Bus)); diff != "" {
		t.Errorf("the config's server.bus (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(fromYAML(t, `{namespace: flotilla}`), plain(t, cfg.Server.FleetRollouts)); diff != "" {
		t.Errorf("the config's server.fleetRollouts (-want +got)\n%s", diff)
	}
}

// The chart's CRD is the one flotilla's projector writes.
func TestFleetRolloutCRD(t *testing.T) {
	chart, err := os.ReadFile("flotilla/crds/fleetrollouts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(fleetrollout.CRD), string(chart)); diff != "" {
		t.Errorf("flotilla/crds/fleetrollouts.yaml is not pkg/fleetrollout's (-want +got):\n%s", diff)
	}
}

// apiToken: by default an API token named admin, its secret generated into
// a Secret of the release (40 random characters, new at each rendering
// here: helm template cannot read the Secret an install made, which an
// upgrade keeps; features/install.feature's upgrade reads it kept), read
// by the config's server.apiTokens from where both containers mount it;
// existingSecret mounts the user's instead and renders none; off, neither.
func TestAPIToken(t *testing.T) {
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	minimal, err := os.ReadFile("testdata/values-minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{}
	if err := yaml.Unmarshal(minimal, &base); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		apiToken map[string]any
		secret   string // the Secret mounted, "" none
		rendered bool   // whether the chart renders it
		tokens   string // the config's server.apiTokens
	}{
		{"default", nil, "flotilla-api-token", true, `[{name: admin, secret: {file: /etc/flotilla/api-token/token}}]`},
		{"existing secret, named", map[string]any{"existingSecret": "mine", "name": "ops"}, "mine", false, `[{name: ops, secret: {file: /etc/flotilla/api-token/token}}]`},
		{"off", map[string]any{"enabled": false}, "", false, `null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := maps.Clone(base)
			if tc.apiToken != nil {
				values["apiToken"] = tc.apiToken
			}
			objs, err := render.Render(render.Request{Kind: render.Helm, Dir: dir, Chart: &render.Chart{
				Dir: "flotilla", Values: values, ReleaseName: "flotilla", Namespace: "flotilla",
			}})
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*unstructured.Unstructured{}
			for _, o := range objs {
				byName[o.GetKind()+"/"+o.GetName()] = o
			}
			sec, ok := byName["Secret/flotilla-api-token"]
			if ok != tc.rendered {
				t.Fatalf("Secret/flotilla-api-token rendered %v, want %v", ok, tc.rendered)
			}
			if ok {
				tok, _, _ := unstructured.NestedString(sec.Object, "data", "token")
				raw, err := base64.StdEncoding.DecodeString(tok)
				if err != nil || !regexp.MustCompile(`^[A-Za-z0-9]{40}$`).Match(raw) {
					t.Errorf("the generated token %q (%v), want 40 letters and digits", raw, err)
				}
			}
			data, _, _ := unstructured.NestedString(byName["ConfigMap/flotilla-config"].Object, "data", "config.yaml")
			var cfg struct {
				Server struct {
					APITokens any `json:"apiTokens"`
				} `json:"server"`
			}
			if err := yaml.Unmarshal([]byte(data), &cfg); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(fromYAML(t, tc.tokens), plain(t, cfg.Server.APITokens)); diff != "" {
				t.Errorf("server.apiTokens (-want +got)\n%s", diff)
			}
			pod, _, _ := unstructured.NestedMap(byName["Deployment/flotilla"].Object, "spec", "template", "spec")
			var got []string
			for _, v := range pod["volumes"].([]any) {
				if v := v.(map[string]any); v["name"] == "api-token" {
					name, _, _ := unstructured.NestedString(v, "secret", "secretName")
					got = append(got, name)
				}
			}
			for _, list := range []string{"initContainers", "containers"} {
				for _, c := range pod[list].([]any) {
					for _, m := range c.(map[string]any)["volumeMounts"].([]any) {
						if m := m.(map[string]any); m["name"] == "api-token" {
							got = append(got, m["mountPath"].(string))
						}
					}
				}
			}
			var want []string
			if tc.secret != "" {
				want = []string{tc.secret, "/etc/flotilla/api-token", "/etc/flotilla/api-token"}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the token's volume and mounts (-want +got)\n%s", diff)
			}
		})
	}
}
