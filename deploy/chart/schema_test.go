package chart

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/render"
)

// install is what `helm install flotilla flotilla -n flotilla` does before
// it sends anything: the values coalesced with the chart's and checked
// against values.schema.json (chartutil.ToRenderValues), then every template
// rendered, NOTES.txt too (engine.Render), where `fail` refuses. (The SDK's
// action.Install in client-only dry-run does the same, but links kubectl,
// ORAS and SQL drivers.) values is a values file's path (*.yaml) or a
// values file's text; "" is the default values.
func install(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	ch, err := loader.Load("flotilla")
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if strings.HasSuffix(values, ".yaml") {
		vals, err = chartutil.ReadValuesFile(values)
	} else {
		vals, err = chartutil.ReadValues([]byte(values))
	}
	if err != nil {
		t.Fatal(err)
	}
	kv, err := chartutil.ParseKubeVersion(render.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "flotilla", Namespace: "flotilla", Revision: 1, IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(ch, rv)
}

// With its default values the chart is refused by helm itself, naming the
// values the default config needs; a misspelt value or one of the wrong
// type or outside its set is refused naming it; what satisfies the config
// installs.
func TestValuesRefused(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         []string // substrings of the error; none: it installs
		notWant      []string
	}{{
		name:   "default values",
		values: "",
		want: []string{
			"kubeconfigs.existingSecret is required: config.fleet.clusters[0].kubeconfig reads /etc/flotilla/kubeconfigs/staging.kubeconfig, config.fleet.clusters[1].kubeconfig reads /etc/flotilla/kubeconfigs/prod.kubeconfig",
			"flotilla fleet bootstrap --write-kubeconfigs DIR",
			"secrets or existingSecret is required: config.receivers[0].secret.file reads /etc/flotilla/secrets/registry-token, config.receivers[1].secret.file reads /etc/flotilla/secrets/flagger-token",
			"set secrets.flagger-token, secrets.registry-token",
		},
	}, {
		name:    "kubeconfigs given, secrets not",
		values:  "kubeconfigs: {existingSecret: kc}",
		want:    []string{"secrets or existingSecret is required"},
		notWant: []string{"kubeconfigs.existingSecret"},
	}, {
		name:    "secrets given, kubeconfigs not",
		values:  "existingSecret: s",
		want:    []string{"kubeconfigs.existingSecret is required"},
		notWant: []string{"secrets or existingSecret"},
	}, {
		name:    "secrets lacking a file the config reads",
		values:  "kubeconfigs: {existingSecret: kc}\nsecrets: {registry-token: a, flagger-tokn: b}\n",
		want:    []string{"secrets lacks a file the config reads: config.receivers[1].secret.file reads /etc/flotilla/secrets/flagger-token (set secrets.flagger-token)"},
		notWant: []string{"registry-token", "kubeconfigs.existingSecret"},
	}, {
		name:   "the minimal values",
		values: "testdata/values-minimal.yaml",
	}, {
		name:   "every option on",
		values: "testdata/values-all.yaml",
	}, {
		name:   "existing Secrets",
		values: "{existingSecret: flotilla-secrets, kubeconfigs: {existingSecret: flotilla-kubeconfigs}}",
	}, {
		name:   "an existing ConfigMap: the config is not read",
		values: "{existingConfigMap: my-config}",
	}, {
		name:   "kubeconfigs mounted by extraVolumeMounts",
		values: "existingSecret: s\nextraVolumes: [{name: kc, secret: {secretName: kc}}]\nextraVolumeMounts: [{name: kc, mountPath: /etc/flotilla/kubeconfigs/}]\n",
	}, {
		name:   "a config naming no mounted files",
		values: "config: {receivers: [], fleet: {clusters: [{name: a, kubeconfig: /var/run/a.kubeconfig}], waves: [{name: a, clusters: [a]}]}}",
	}, {
		name:    "a config reading registry credentials no value mounts",
		values:  "existingSecret: s\nkubeconfigs: {existingSecret: kc}\nregistrySecrets: [regcred]\nconfig: {registries: {dockerConfigFiles: [/etc/flotilla/registries/regcred/.dockerconfigjson, /etc/flotilla/registries/ghcr/.dockerconfigjson]}}\n",
		want:    []string{"registrySecrets lacks a Secret the config reads: config.registries.dockerConfigFiles[1] reads /etc/flotilla/registries/ghcr/.dockerconfigjson (add ghcr to registrySecrets)"},
		notWant: []string{"regcred/"},
	}, {
		name:   "a registry Secret that is not a Secret's name",
		values: "registrySecrets: [Reg_Cred]",
		want:   []string{"/registrySecrets/0"},
	}, {
		name:   "a misspelt top-level value",
		values: "servce: {port: 1}",
		want:   []string{"servce"},
	}, {
		name:   "a misspelt nested value",
		values: "image: {digets: x}",
		want:   []string{"digets"},
	}, {
		name:   "a misspelt value of an Ingress path",
		values: "ingress: {hosts: [{host: a.example.com, paths: [{path: /hooks, pathtype: Prefix}]}]}",
		want:   []string{"pathtype"},
	}, {
		name:   "a port of the wrong type",
		values: `service: {port: "8080"}`,
		want:   []string{"/service/port"},
	}, {
		name:   "a port out of range",
		values: "service: {port: 70000}",
		want:   []string{"/service/port"},
	}, {
		name:   "a log level outside its set",
		values: "logLevel: verbose",
		want:   []string{"/logLevel"},
	}, {
		name:   "a pull policy outside its set",
		values: "image: {pullPolicy: Sometimes}",
		want:   []string{"/image/pullPolicy"},
	}, {
		name:   "a Service type outside the chart's",
		values: "service: {type: ExternalName}",
		want:   []string{"/service/type"},
	}, {
		name:   "a digest that is not one",
		values: "image: {digest: sha256:abc}",
		want:   []string{"/image/digest"},
	}, {
		name:   "a boolean as a string",
		values: `hostNetwork: "yes"`,
		want:   []string{"/hostNetwork"},
	}, {
		name:   "an annotation that is not a string",
		values: "podAnnotations: {example.com/replicas: 2}",
		want:   []string{"/podAnnotations/example.com~1replicas"},
	}, {
		name:   "scale-out mode",
		values: "testdata/values-scaleout.yaml",
	}, {
		name:   "fleet rollouts without the service account's token",
		values: "kubeconfigs: {existingSecret: kc}\nexistingSecret: s\nfleetRollouts: {enabled: true}\n",
		want:   []string{"fleetRollouts.enabled needs serviceAccount.automountToken: true"},
	}, {
		name:   "scale-out mode keeping the claim",
		values: "kubeconfigs: {existingSecret: kc}\nexistingSecret: s\nscaleOut: {enabled: true, nats: {url: 'nats://nats:4222'}}\n",
		want:   []string{"scaleOut.enabled needs persistence.enabled: false"},
	}, {
		name:   "scale-out mode without NATS",
		values: "kubeconfigs: {existingSecret: kc}\nexistingSecret: s\npersistence: {enabled: false}\nscaleOut: {enabled: true}\n",
		want:   []string{"/scaleOut/nats"},
	}, {
		name:   "scale-out mode on an http URL",
		values: "kubeconfigs: {existingSecret: kc}\nexistingSecret: s\npersistence: {enabled: false}\nscaleOut: {enabled: true, nats: {url: 'http://nats:4222'}}\n",
		want:   []string{"/scaleOut/nats/url"},
	}, {
		name:   "open objects pass Kubernetes' fields through",
		values: "existingSecret: s\nkubeconfigs: {existingSecret: kc}\nsecurityContext: {seLinuxOptions: {level: s0}}\nresources: {requests: {cpu: 0.5}}\naffinity: {nodeAffinity: {}}\nservice: {annotations: {a: b}}\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := install(t, tc.values)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("installed; want an error naming %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error names %q:\n%v", w, err)
				}
			}
		})
	}
}

// values.schema.json and values.yaml hold the same values: every value of
// values.yaml has its type in the schema, and the schema's objects that
// refuse unknown keys know no key values.yaml lacks (but Helm's global).
func TestSchemaCoversValues(t *testing.T) {
	var schema, values map[string]any
	for file, v := range map[string]*map[string]any{"flotilla/values.schema.json": &schema, "flotilla/values.yaml": &values} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	var missing, extra []string
	var walk func(s, v map[string]any, path string)
	walk = func(s, v map[string]any, path string) {
		if ref, ok := s["$ref"].(string); ok {
			s, _ = schema["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		}
		props, _ := s["properties"].(map[string]any)
		closed := s["additionalProperties"] == false
		for k, val := range v {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if closed {
					missing = append(missing, path+"."+k)
				}
				continue
			}
			if _, ok := ps["type"]; !ok && ps["$ref"] == nil && ps["anyOf"] == nil {
				missing = append(missing, path+"."+k+" (no type)")
			}
			if m, ok := val.(map[string]any); ok {
				walk(ps, m, path+"."+k)
			}
		}
		if closed {
			for k := range props {
				if _, ok := v[k]; !ok && path+"."+k != ".global" {
					extra = append(extra, path+"."+k)
				}
			}
		}
	}
	walk(schema, values, "")
	slices.Sort(missing)
	slices.Sort(extra)
	if diff := cmp.Diff([]string(nil), missing); diff != "" {
		t.Errorf("values of values.yaml the schema lacks (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string(nil), extra); diff != "" {
		t.Errorf("values of the schema values.yaml lacks (-want +got)\n%s", diff)
	}
	if !json.Valid(mustRead(t, "flotilla/values.schema.json")) {
		t.Error("values.schema.json is not JSON")
	}
}

func mustRead(t *testing.T, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// NOTES.txt says where the config's kubeconfigs and secret files come from.
func TestNotes(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"testdata/values-minimal.yaml", "/etc/flotilla/kubeconfigs from the Secret flotilla-kubeconfigs\n" +
			"  /etc/flotilla/secrets from the Secret flotilla-secrets (secrets: flagger-token, registry-token)\n"},
		{"{existingSecret: s, kubeconfigs: {existingSecret: k}}", "/etc/flotilla/kubeconfigs from the Secret k\n" +
			"  /etc/flotilla/secrets from the Secret s\n"},
		{"testdata/values-minimal.yaml", "  export FLOTILLA_TOKEN=$(kubectl -n flotilla get secret flotilla-api-token -o jsonpath='{.data.token}' | base64 -d)\n" +
			"  flotilla get rollouts --server http://127.0.0.1:8080\n" +
			"Every read and control needs an API token: the one above is named admin, generated\n" +
			"at the first install and kept by upgrades. Log in to the web UI at http://127.0.0.1:8080/ui/ with it."},
		{"{existingSecret: s, kubeconfigs: {existingSecret: k}, apiToken: {enabled: false}}", "--token <an API token of config.server.apiTokens>\n" +
			"Every read and control needs an API token of the config's server.apiToken/apiTokens (apiToken.enabled is off)."},
		{"{existingConfigMap: c}", "Its configuration: the ConfigMap c, with\n" +
			"  /etc/flotilla/kubeconfigs from nothing (kubeconfigs.existingSecret is not set)\n" +
			"  /etc/flotilla/secrets from nothing (neither secrets nor existingSecret is set)\n"},
	} {
		files, err := install(t, tc.values)
		if err != nil {
			t.Fatalf("values %q: %v", tc.values, err)
		}
		if notes := files["flotilla/templates/NOTES.txt"]; !strings.Contains(notes, tc.want) {
			t.Errorf("values %q: NOTES.txt lacks %q:\n%s", tc.values, tc.want, notes)
		}
	}
}
