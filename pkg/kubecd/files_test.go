package kubecd

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const envs = `environments:
  - name: test
    clusterName: c1
    kubeNamespace: apps
    releasesFiles: [test/releases.yaml]
    defaultValuesFile: test/defaults.yaml
    defaultValues:
      - {key: ingress.domain, value: test.example.com}
  - name: prod
    provider:
      gke: {project: p, clusterName: prod, region: europe-west1}
    releases: [./prod/releases.yaml]
clusters:
  - name: c1
    provider:
      existingContext: {contextName: kind-c1}
helmRepos:
  - {name: stable, url: "https://charts.example.com/stable"}
`

// TestLoad reads both spellings of KubeCD's files (the design document's
// inline provider and releases, kubecd's clusters and releasesFiles) into
// environments with their releases, paths relative to the repository.
func TestLoad(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"deploy/environments.yaml": envs,
		"deploy/test/releases.yaml": `resourceFiles: [storage.yaml]
releases:
  - name: api
    chart: {dir: ../charts/api}
    valuesFile: api-values.yaml
    values:
      - {key: image.tag, value: "1.2"}
      - {key: a\.b.c, value: 3}
    trigger:
      image: {track: PatchLevel}
  - name: ingress
    chart: {reference: stable/nginx-ingress, version: 0.9.5}
    skipDefaultValues: true
`,
		"deploy/prod/releases.yaml": `releases:
  - name: cache
    chart: {reference: "oci://registry.example.com/charts/redis", version: 1.0.0}
  - name: roles
    resourceFiles: [roles.yaml]
`,
	})
	got, err := Load(dir, "deploy/environments.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Files{
		EnvironmentsFile: "deploy/environments.yaml",
		HelmRepos:        map[string]string{"stable": "https://charts.example.com/stable"},
		Environments: []Environment{{
			Name: "test", Cluster: "c1", Context: "kind-c1", Namespace: "apps",
			DefaultValuesFile: "deploy/test/defaults.yaml",
			DefaultValues:     map[string]any{"ingress": map[string]any{"domain": "test.example.com"}},
			ReleaseFiles:      []string{"deploy/test/releases.yaml"},
			Releases: []Release{{
				Name: "api", File: "deploy/test/releases.yaml", ChartDir: "deploy/charts/api", ValuesFile: "deploy/test/api-values.yaml",
				Values:        map[string]any{"image": map[string]any{"tag": "1.2"}, "a.b": map[string]any{"c": float64(3)}},
				ResourceFiles: []string{"deploy/test/storage.yaml"},
				Triggers:      []Trigger{{Track: "PatchLevel", RepoValue: "image.repository", TagValue: "image.tag", PrefixValue: "image.prefix"}},
			}, {
				Name: "ingress", File: "deploy/test/releases.yaml", SkipDefaultValues: true,
				Ref: &ChartRef{Repository: "https://charts.example.com/stable", Name: "nginx-ingress", Version: "0.9.5"},
			}},
		}, {
			Name: "prod", Cluster: "prod", Context: "gke_p_europe-west1_prod", Namespace: "default",
			ReleaseFiles: []string{"deploy/prod/releases.yaml"},
			Releases: []Release{{
				Name: "cache", File: "deploy/prod/releases.yaml",
				Ref: &ChartRef{Repository: "oci://registry.example.com/charts/redis", Version: "1.0.0"},
			}, {
				Name: "roles", File: "deploy/prod/releases.yaml", ResourceFiles: []string{"deploy/prod/roles.yaml"},
			}},
		}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Load (-want +got):\n%s", d)
	}
	env := got.Environment("test")
	if d := cmp.Diff([]string{
		"deploy/charts/api", "deploy/environments.yaml", "deploy/test/api-values.yaml", "deploy/test/defaults.yaml",
		"deploy/test/releases.yaml", "deploy/test/storage.yaml",
	}, got.TrackedPaths(env, *env.Release("api"))); d != "" {
		t.Errorf("TrackedPaths (-want +got):\n%s", d)
	}
}

// TestLoadRefuses: every field flotilla cannot honour is refused, named,
// with the file it is in; an unknown field too (no field is ignored).
func TestLoadRefuses(t *testing.T) {
	env := func(releases string) map[string]string {
		return map[string]string{
			"environments.yaml": "environments:\n  - name: e\n    provider: {minikube: {}}\n    releases: [releases.yaml]\n",
			"releases.yaml":     releases,
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  []string
	}{{
		name: "valueFrom",
		files: env(`releases:
  - name: ingress
    chart: {reference: stable/nginx-ingress, version: 0.9.5}
    values:
      - key: controller.service.loadBalancerIP
        valueFrom:
          gceResource:
            address: {name: analytics-ingress, isGlobal: false}
`),
		want: []string{
			`releases.yaml: release ingress.chart.reference: "stable/nginx-ingress": no helmRepos entry of environments.yaml is named "stable"`,
			"releases.yaml: release ingress.values[0].valueFrom: refused: flotilla reads no cloud resource; set value",
		},
	}, {
		name:  "chart reference without version",
		files: env("releases:\n  - name: r\n    chart: {reference: \"oci://r.example.com/c/x\"}\n"),
		want:  []string{"releases.yaml: release r.chart.version: required for a chart reference (oci://r.example.com/c/x): pin the chart's version"},
	}, {
		name:  "tag in an OCI reference",
		files: env("releases:\n  - name: r\n    chart: {reference: \"oci://r.example.com/c/x:1.0\", version: 1.0.0}\n"),
		want:  []string{`releases.yaml: release r.chart.reference: "oci://r.example.com/c/x:1.0": no tag or digest in the reference; the version is chart.version`},
	}, {
		name:  "unknown release field",
		files: env("releases:\n  - name: r\n    chart: {dir: c}\n    namespace: other\n"),
		want:  []string{`releases.yaml: json: unknown field "namespace"`},
	}, {
		name:  "unknown chart field",
		files: env("releases:\n  - name: r\n    chart: {dir: c, repo: x}\n"),
		want:  []string{`releases.yaml: json: unknown field "repo"`},
	}, {
		name:  "helm trigger",
		files: env("releases:\n  - name: r\n    chart: {dir: c}\n    triggers:\n      - helm: {track: Newest}\n"),
		want:  []string{"releases.yaml: release r.triggers[0].helm: refused: flotilla does not look for new chart versions (pin chart.version and push a change)"},
	}, {
		name:  "bad track",
		files: env("releases:\n  - name: r\n    chart: {dir: c}\n    triggers:\n      - image: {track: Latest}\n"),
		want:  []string{`releases.yaml: release r.triggers[0].image.track: "Latest": want one of PatchLevel, MinorVersion, MajorVersion, Newest`},
	}, {
		name:  "prefixValue, which KubeCD spells repoPrefixValue",
		files: env("releases:\n  - name: r\n    chart: {dir: c}\n    triggers:\n      - image: {track: Newest, prefixValue: image.prefix}\n"),
		want:  []string{"releases.yaml: release r.triggers[0].image.prefixValue: unknown field: KubeCD's is repoPrefixValue"},
	}, {
		name:  "version of a chart directory",
		files: env("releases:\n  - name: r\n    chart: {dir: c, version: 1.0.0}\n"),
		want:  []string{"releases.yaml: release r.chart.version: only for a chart reference (a chart directory is versioned by the repository)"},
	}, {
		name:  "path leaving the repository",
		files: env("releases:\n  - name: r\n    chart: {dir: ../../c}\n"),
		want:  []string{`releases.yaml: release r.chart.dir: "../../c" leaves the repository`},
	}, {
		name:  "neither chart nor resource files",
		files: env("releases:\n  - name: r\n    valuesFile: v.yaml\n"),
		want:  []string{"releases.yaml: release r: must define either chart or resourceFiles"},
	}, {
		name:  "a release twice",
		files: env("releases:\n  - name: r\n    chart: {dir: c}\n  - name: r\n    chart: {dir: d}\n"),
		want:  []string{`environments.yaml: environments[0]: release "r" is declared twice (in releases.yaml)`},
	}, {
		name: "unknown environment field",
		files: map[string]string{
			"environments.yaml": "environments:\n  - name: e\n    provider: {minikube: {}}\n    releases: [releases.yaml]\n    kubeContext: x\n",
			"releases.yaml":     "releases: []\n",
		},
		want: []string{`environments.yaml: json: unknown field "kubeContext"`},
	}, {
		name: "two providers",
		files: map[string]string{
			"environments.yaml": "environments:\n  - name: e\n    provider: {minikube: {}, dockerForDesktop: {}}\n    releases: [releases.yaml]\n",
			"releases.yaml":     "releases: []\n",
		},
		want: []string{"environments.yaml: environments[0].provider: want exactly one of gke, aks, minikube, dockerForDesktop, existingContext"},
	}, {
		name: "unknown cluster",
		files: map[string]string{
			"environments.yaml": "environments:\n  - name: e\n    clusterName: nope\n    releases: [releases.yaml]\n",
			"releases.yaml":     "releases: []\n",
		},
		want: []string{`environments.yaml: environments[0].clusterName: "nope" is not among clusters`},
	}, {
		name: "missing release file",
		files: map[string]string{
			"environments.yaml": "environments:\n  - name: e\n    provider: {minikube: {}}\n    releases: [gone.yaml]\n",
		},
		want: []string{"reading gone.yaml: open "},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeFiles(t, tc.files)
			_, err := Load(dir, DefaultEnvironmentsFile)
			var kerr *Error
			if !errors.As(err, &kerr) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want an *Error", err)
			}
			got := kerr.Problems
			for i := range got {
				for _, w := range tc.want {
					if strings.HasSuffix(w, " ") && strings.HasPrefix(got[i], w) {
						got[i] = w
					}
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestSetValue(t *testing.T) {
	m := map[string]any{}
	for _, kv := range []struct {
		k string
		v any
	}{{"image.tag", "1"}, {"image.repository", "r"}, {`a\.b`, true}} {
		if err := SetValue(m, kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(map[string]any{"image": map[string]any{"tag": "1", "repository": "r"}, "a.b": true}, m); d != "" {
		t.Error(d)
	}
	if err := SetValue(m, "image.tag.x", 1); err == nil || !strings.Contains(err.Error(), "image.tag is set to a value") {
		t.Errorf("got %v", err)
	}
}
