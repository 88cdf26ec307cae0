package canary_test

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what Render makes of testdata/cases")

// goldenInput is the cluster and rollout every golden case renders for.
var goldenInput = canary.Input{
	Cluster: "c1",
	Rollout: "r1",
	Event: canary.EventHook{
		URL:      "http://flotilla.example.com/hooks/flagger/s3cret",
		Metadata: map[string]string{"cluster": "c1", "rollout": "r1"},
	},
}

// parseApp parses one application, given as the YAML of one entry of
// applications, the way config.Load does: strictly, with defaults, validated.
func parseApp(t *testing.T, app string) (config.Application, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	doc.WriteString(`receivers: [{name: flagger, type: flagger, insecure: true}]
fleet:
  clusters: [{name: c1, kubeconfig: kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
`)
	for i, line := range strings.Split(strings.TrimRight(app, "\n"), "\n") {
		prefix := "    "
		if i == 0 {
			prefix = "  - "
		}
		doc.WriteString(prefix + line + "\n")
	}
	c, err := config.Parse([]byte(doc.String()), dir)
	if err != nil {
		return config.Application{}, err
	}
	return c.Applications[0], nil
}

// cases returns the names of testdata/cases/*.yaml, without extension.
func cases(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "cases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	return names
}

// renderYAML renders a case as the golden file holds it: every object, in
// the order they are applied, as YAML documents.
func renderYAML(t *testing.T, name string) []byte {
	t.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", "cases", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	app, err := parseApp(t, string(in))
	if err != nil {
		t.Fatalf("parsing testdata/cases/%s.yaml: %v", name, err)
	}
	objs, err := canary.Render(app, goldenInput).Unstructured()
	if err != nil {
		t.Fatalf("Unstructured: %v", err)
	}
	var out bytes.Buffer
	out.WriteString("# Rendered from testdata/cases/" + name + ".yaml by TestGolden; go test -run TestGolden -update rewrites it.\n")
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes()
}

// TestGolden renders every case of testdata/cases and compares the objects
// with testdata/golden. TestApply applies the golden objects to a real API
// server.
func TestGolden(t *testing.T) {
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			got := renderYAML(t, name)
			path := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestGolden -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s\ngo test -run TestGolden -update rewrites it", path, diff)
			}
		})
	}
	if *update {
		// Goldens whose case is gone would still be applied by TestApply.
		goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.yaml"))
		for _, g := range goldens {
			if !slices.Contains(cases(t), strings.TrimSuffix(filepath.Base(g), ".yaml")) {
				if err := os.Remove(g); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// TestGoldenCoversEveryPair checks that every strategy and provider Flagger
// supports together has a case, named <strategy>-<provider>.
func TestGoldenCoversEveryPair(t *testing.T) {
	have := cases(t)
	for _, p := range config.Providers {
		for _, s := range config.Strategies {
			name := s + "-" + p
			switch {
			case config.Supports(p, s) && !slices.Contains(have, name):
				t.Errorf("no case testdata/cases/%s.yaml for strategy %s with provider %s", name, s, p)
			case !config.Supports(p, s) && slices.Contains(have, name):
				t.Errorf("testdata/cases/%s.yaml: Flagger does not support strategy %s with provider %s", name, s, p)
			}
		}
	}
}

// TestInvalidPairs checks that every strategy a provider cannot run is a
// validation error that says what to use instead.
func TestInvalidPairs(t *testing.T) {
	// What each strategy needs besides strategy and provider, so that the
	// only problem left is the pair.
	needs := map[string]string{
		config.StrategyCanary:    "    canaryStrategy: {stepWeight: 10}\n",
		config.StrategyABTesting: "    match: [{headers: {x-canary: {exact: insider}}}]\n",
		config.StrategyBlueGreen: "",
	}
	want := map[[2]string]config.Problem{
		{config.ProviderKubernetes, config.StrategyCanary}: {
			Path:    "applications[0].delivery.trafficRouting.canaryStrategy",
			Message: "the kubernetes provider supports blue/green only; use a mesh or ingress provider for weighted canaries",
		},
		{config.ProviderKubernetes, config.StrategyABTesting}: {
			Path:    "applications[0].delivery.trafficRouting.match",
			Message: "the kubernetes provider supports blue/green only; use istio, nginx, contour or gatewayapi for A/B testing",
		},
		{config.ProviderKuma, config.StrategyABTesting}: {
			Path:    "applications[0].delivery.trafficRouting.match",
			Message: "Flagger runs A/B testing with istio, nginx, contour or gatewayapi, not kuma; use one of those providers, or strategy canary",
		},
		{config.ProviderKuma, config.StrategyBlueGreen}: {
			Path:    "applications[0].delivery.strategy",
			Message: "Flagger runs blue/green with istio, linkerd, nginx, contour or gatewayapi, not kuma; use one of those providers, or strategy canary",
		},
		{config.ProviderLinkerd, config.StrategyABTesting}: {
			Path:    "applications[0].delivery.trafficRouting.match",
			Message: "Flagger runs A/B testing with istio, nginx, contour or gatewayapi, not linkerd; use one of those providers, or strategy canary, or strategy blueGreen",
		},
		{config.ProviderTraefik, config.StrategyABTesting}: {
			Path:    "applications[0].delivery.trafficRouting.match",
			Message: "Flagger runs A/B testing with istio, nginx, contour or gatewayapi, not traefik; use one of those providers, or strategy canary",
		},
		{config.ProviderTraefik, config.StrategyBlueGreen}: {
			Path:    "applications[0].delivery.strategy",
			Message: "Flagger runs blue/green with istio, linkerd, nginx, contour or gatewayapi, not traefik; use one of those providers, or strategy canary",
		},
	}
	for _, p := range config.Providers {
		for _, s := range config.Strategies {
			if config.Supports(p, s) {
				continue
			}
			t.Run(s+"-"+p, func(t *testing.T) {
				w, ok := want[[2]string{p, s}]
				if !ok {
					t.Fatalf("no expected problem for strategy %s with provider %s", s, p)
				}
				app := "name: podinfo\nimage: registry.example.com/demo/podinfo\nworkload: {name: podinfo}\nservice: {port: 9898}\n" +
					"delivery:\n  strategy: " + s + "\n  provider: " + p + "\n  trafficRouting:\n" + needs[s]
				_, err := parseApp(t, app)
				var verr *config.ValidationError
				if !errors.As(err, &verr) {
					t.Fatalf("Parse = %v, want a ValidationError", err)
				}
				if diff := cmp.Diff([]config.Problem{w}, verr.Problems); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
			})
		}
	}
}
