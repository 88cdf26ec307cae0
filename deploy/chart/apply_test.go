package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/render"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// valuesFiles are the renderings checked: the least the default values
// need (they are refused alone: TestValuesRefused) and every option on.
var valuesFiles = []string{"testdata/values-minimal.yaml", "testdata/values-all.yaml", "testdata/values-scaleout.yaml"}

// `helm lint --strict`: no warning and no error, with either values. (Lint
// renders in Helm's lint mode, where `fail` only logs: that the default
// values are refused is TestValuesRefused's.)
func TestLint(t *testing.T) {
	for _, file := range valuesFiles {
		values := map[string]any{}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &values); err != nil {
			t.Fatal(err)
		}
		l := lint.All("flotilla", values, "flotilla", false)
		for _, m := range l.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("values %q: %v", file, m)
			} else {
				t.Logf("values %q: %v", file, m)
			}
		}
	}
}

// Every rendering is accepted by a real API server: a server-side dry run,
// then a real apply into a namespace of its own, with the CRDs of the
// optional objects (ServiceMonitor, HTTPRoute) installed first.
func TestApply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(cfg, "flotilla-chart-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range localfleet.ChartCRDs() {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("%v (make fleet-build fetches it)", err)
		}
		crds, err := kube.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(ctx, crds...); err != nil {
			t.Fatal(err)
		}
		for _, c := range crds {
			if err := kube.WaitCRDsEstablished(ctx, cfg, c.GetName()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The kustomize base (deploy/manifests) brings its own namespace.
	base, err := render.Render(render.Request{Kind: render.Kustomize, Dir: "..", Paths: []string{"manifests"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, namespace string
		objs            []*unstructured.Unstructured
	}{
		{"minimal values", "chart-minimal", renderIn(t, "testdata/values-minimal.yaml", "chart-minimal")},
		{"every option on", "chart-all", renderIn(t, "testdata/values-all.yaml", "chart-all")},
		{"kustomize base", "", base},
	} {
		if tc.namespace != "" {
			ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": tc.namespace}}}
			if err := a.Apply(ctx, ns); err != nil {
				t.Fatal(err)
			}
		}
		for _, o := range tc.objs {
			if o.GetKind() == "Namespace" {
				continue // a dry run cannot create what the next objects go into
			}
			if _, err := a.ApplyObject(ctx, o, true); err != nil && tc.namespace != "" {
				t.Errorf("%s: dry run: %v", tc.name, err)
			}
		}
		for _, o := range tc.objs {
			if _, err := a.ApplyObject(ctx, o, false); err != nil {
				t.Errorf("%s: %v", tc.name, err)
				continue
			}
			if _, err := a.Get(ctx, o); err != nil {
				t.Errorf("%s: reading back %s %s: %v", tc.name, o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// The committed kustomize base is what the chart renders (`make manifests`).
func TestBaseCurrent(t *testing.T) {
	want, err := Base(".")
	if err != nil {
		t.Fatal(err)
	}
	alerts, err := Alerts(".")
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string][]byte{"flotilla.yaml": want, "kustomization.yaml": []byte(Kustomization), "namespace.yaml": []byte(Namespace), "prometheusrule.yaml": alerts} {
		got, err := os.ReadFile(filepath.Join("..", "manifests", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(w) {
			t.Errorf("deploy/manifests/%s is not what the chart renders: run make manifests", name)
		}
	}
}

// The chart's README lists every value with its default and description.
func TestValuesDocumented(t *testing.T) {
	values, err := os.ReadFile("flotilla/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ValuesTable(values)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("flotilla/README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "## Values\n\n"+table) {
		t.Errorf("flotilla/README.md's values table is not values.yaml's: run make manifests")
	}
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[2:] {
		if strings.HasSuffix(line, "|  |") {
			t.Errorf("undocumented value (add a \"# -- \" comment in values.yaml): %s", line)
		}
	}
}
