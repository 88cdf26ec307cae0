package bootstrap

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

func testConfig() *config.Config {
	return &config.Config{
		Fleet: config.Fleet{Clusters: []config.Cluster{
			{Name: "eu", Labels: map[string]string{"mesh": "istio"}},
			{Name: "us"},
		}},
		Applications: []config.Application{
			{Name: "shop", Namespace: "shop", Delivery: config.Delivery{Provider: config.ProviderIstio},
				ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "istio"}}},
			{Name: "cart", Namespace: "shop"},
			{Name: "api", Namespace: "api"},
		},
	}
}

func refs(t Target) []string {
	var out []string
	for _, o := range t.Objects {
		out = append(out, RefOf(o).String())
	}
	return out
}

// What goes into each cluster: Flagger (kustomize's order), the identity,
// a namespace and a RoleBinding per application namespace of the cluster.
func TestPlan(t *testing.T) {
	ts, err := Plan(testConfig(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0].Name != "eu" || ts[1].Name != "us" {
		t.Fatalf("targets %v", ts)
	}
	flagger := []string{
		"Namespace flagger-system",
		"CustomResourceDefinition alertproviders.flagger.app",
		"CustomResourceDefinition canaries.flagger.app",
		"CustomResourceDefinition metrictemplates.flagger.app",
		"ServiceAccount flagger-system/flagger",
		"ClusterRole flagger",
		"ClusterRoleBinding flagger",
		"Deployment flagger-system/flagger",
	}
	ident := []string{
		"Namespace flotilla-system",
		"ServiceAccount flotilla-system/flotilla",
		"Secret flotilla-system/flotilla-token",
		"ClusterRole flotilla-reader",
		"ClusterRole flotilla-deliver",
		"ClusterRoleBinding flotilla-reader",
		"Namespace api",
		"RoleBinding api/flotilla-deliver",
		"Namespace shop",
		"RoleBinding shop/flotilla-deliver",
	}
	if diff := cmp.Diff(slices.Concat(flagger, ident), refs(ts[0])); diff != "" {
		t.Errorf("eu (-want +got)\n%s", diff)
	}
	// us: shop's selector leaves it out, cart still goes there.
	if diff := cmp.Diff(slices.Concat(flagger, ident), refs(ts[1])); diff != "" {
		t.Errorf("us (-want +got)\n%s", diff)
	}
	args := func(t Target) []string {
		for _, o := range t.Objects {
			if o.GetKind() == "Deployment" {
				cs := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
				c := cs[0].(map[string]any)
				var out []string
				for _, a := range c["args"].([]any) {
					out = append(out, a.(string))
				}
				return append(out, c["image"].(string))
			}
		}
		return nil
	}
	// eu's applications disagree on the provider (istio, kubernetes):
	// Flagger's default is kubernetes; each canary names its own.
	for _, tc := range []struct {
		target Target
		want   []string
	}{
		{ts[0], []string{"-log-level=info", "-include-label-prefix=app.kubernetes.io", "-mesh-provider=kubernetes", "-metrics-server=http://prometheus:9090", "-cluster-name=eu", "ghcr.io/fluxcd/flagger:1.41.0"}},
		{ts[1], []string{"-log-level=info", "-include-label-prefix=app.kubernetes.io", "-mesh-provider=kubernetes", "-metrics-server=http://prometheus:9090", "-cluster-name=us", "ghcr.io/fluxcd/flagger:1.41.0"}},
	} {
		if diff := cmp.Diff(tc.want, args(tc.target)); diff != "" {
			t.Errorf("%s: Flagger's args (-want +got)\n%s", tc.target.Name, diff)
		}
	}
	// Only istio applications in a cluster: istio is Flagger's provider.
	cfg := testConfig()
	cfg.Applications = cfg.Applications[:1]
	ts, err = Plan(cfg, []string{"eu"}, Options{MetricsServer: "http://prom:9090", FlaggerArgs: []string{"-slack-url=https://hooks.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-log-level=info", "-include-label-prefix=app.kubernetes.io", "-mesh-provider=istio", "-metrics-server=http://prom:9090", "-cluster-name=eu", "-slack-url=https://hooks.example.com", "ghcr.io/fluxcd/flagger:1.41.0"}
	if diff := cmp.Diff(want, args(ts[0])); diff != "" {
		t.Errorf("istio only: Flagger's args (-want +got)\n%s", diff)
	}
	// The load tester follows Flagger, in its own namespace, at its version.
	ts, err = Plan(testConfig(), []string{"us"}, Options{LoadTesterNamespace: "lt"})
	if err != nil {
		t.Fatal(err)
	}
	got := refs(ts[0])[len(flagger) : len(flagger)+3]
	if diff := cmp.Diff([]string{"Namespace lt", "Service lt/flagger-loadtester", "Deployment lt/flagger-loadtester"}, got); diff != "" {
		t.Errorf("load tester (-want +got)\n%s", diff)
	}
	for _, o := range ts[0].Objects {
		if o.GetKind() == "Deployment" && o.GetName() == "flagger-loadtester" {
			c := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			if c["image"] != LoadTesterImage+":"+LoadTesterVersion {
				t.Errorf("load tester image %v", c["image"])
			}
		}
	}
}

// With the Tekton executor in a fleet cluster, that cluster also gets the
// pipelines, the Role that runs them and the steps' ServiceAccount; in a
// cluster outside the fleet, a target of its own with flotilla's account.
func TestPlanTekton(t *testing.T) {
	cfg := testConfig()
	cfg.Fleet.Executor = config.ExecutorTekton
	cfg.Fleet.Tekton = &config.TektonExecutor{Cluster: "us", Namespace: "api", ServiceAccount: "steps"}
	ts, err := Plan(cfg, []string{"us"}, Options{Image: "registry.example.com/flotilla@sha256:abc"})
	if err != nil {
		t.Fatal(err)
	}
	got := refs(ts[0])
	tail := got[len(got)-8:]
	want := []string{
		// Namespace api came with the application: not twice.
		"Role api/flotilla-tekton", "RoleBinding api/flotilla-tekton", "ServiceAccount api/steps",
		"Task api/flotilla-apply-canary", "Task api/flotilla-apply-manifests", "Task api/flotilla-bump-image", "Pipeline api/flotilla-rollout",
	}
	if diff := cmp.Diff(want, tail[1:]); diff != "" {
		t.Errorf("tekton objects (-want +got)\n%s", diff)
	}
	if strings.Count(strings.Join(got, "\n"), "Namespace api\n") != 1 {
		t.Errorf("namespace api twice: %v", got)
	}
	cfg.Fleet.Tekton = &config.TektonExecutor{Kubeconfig: "/k/tekton", Namespace: "ci"}
	ts, err = Plan(cfg, []string{TektonTarget}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Name != TektonTarget || ts[0].Kubeconfig != "/k/tekton" || ts[0].Flagger {
		t.Fatalf("targets %+v", ts)
	}
	want = []string{
		"Namespace flotilla-system", "ServiceAccount flotilla-system/flotilla", "Secret flotilla-system/flotilla-token",
		"Namespace ci", "Role ci/flotilla-tekton", "RoleBinding ci/flotilla-tekton",
		"Task ci/flotilla-apply-canary", "Task ci/flotilla-apply-manifests", "Task ci/flotilla-bump-image", "Pipeline ci/flotilla-rollout",
	}
	if diff := cmp.Diff(want, refs(ts[0])); diff != "" {
		t.Errorf("tekton target (-want +got)\n%s", diff)
	}
	if _, err := Plan(cfg, []string{"mars"}, Options{}); err == nil || !strings.Contains(err.Error(), `"mars"`) {
		t.Errorf("an unknown cluster: %v", err)
	}
}

func TestParseAllow(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    rbacv1.PolicyRule
		wantErr string
	}{
		{in: "configmaps", want: rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "delete"}}},
		{in: "networking.k8s.io/ingresses", want: rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "create", "patch", "delete"}}},
		{in: "*", wantErr: "no wildcards"},
		{in: "apps/*", wantErr: "no wildcards"},
		{in: "apps/", wantErr: "want resource"},
		{in: "ConfigMap", wantErr: "lowercase plurals"},
	} {
		got, err := ParseAllow(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got)\n%s", tc.in, diff)
		}
	}
}

// The embedded manifests are Flagger's files at FlaggerVersion, unchanged.
func TestManifestsAreFlaggers(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/fluxcd/flagger").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := strings.TrimSpace(string(out))
	if !strings.Contains(dir, "@v"+FlaggerVersion) {
		t.Fatalf("go.mod's Flagger is %s, bootstrap's %s: keep them in step", dir, FlaggerVersion)
	}
	for local, upstream := range map[string]string{
		"flagger/account.yaml": "kustomize/base/flagger/account.yaml", "flagger/rbac.yaml": "kustomize/base/flagger/rbac.yaml",
		"flagger/crd.yaml": "kustomize/base/flagger/crd.yaml", "flagger/deployment.yaml": "kustomize/base/flagger/deployment.yaml",
		"loadtester/deployment.yaml": "kustomize/tester/deployment.yaml", "loadtester/service.yaml": "kustomize/tester/service.yaml",
	} {
		a, err := os.ReadFile(filepath.Join("manifests", local))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, upstream))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("manifests/%s differs from Flagger's %s", local, upstream)
		}
	}
}

// A cluster a git application targets grants DeliverRole its inventory's
// ConfigMaps; one only image applications target does not.
func TestPlanGrantsTheInventory(t *testing.T) {
	cfg := testConfig()
	cfg.Applications = append(cfg.Applications, config.Application{Name: "web", Namespace: "web",
		Source:          &config.Source{Git: &config.GitSource{URL: "https://git.example.com/deploy.git"}},
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mesh": "istio"}}})
	ts, err := Plan(cfg, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, target := range ts {
		for _, o := range target.Objects {
			if o.GetKind() != "ClusterRole" || o.GetName() != DeliverRole {
				continue
			}
			rules, _, _ := unstructuredRules(o.Object)
			got[target.Name] = slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, InventoryRule) })
		}
	}
	if diff := cmp.Diff(map[string]bool{"eu": true, "us": false}, got); diff != "" {
		t.Errorf("DeliverRole grants the inventory's ConfigMaps (-want +got):\n%s", diff)
	}
}

// unstructuredRules reads a ClusterRole's rules.
func unstructuredRules(obj map[string]any) ([]rbacv1.PolicyRule, bool, error) {
	var role rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, &role); err != nil {
		return nil, false, err
	}
	return role.Rules, true, nil
}
