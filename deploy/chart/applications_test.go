package chart

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// The chart's Application CRD is the one controller-gen writes from
// pkg/resources/v1alpha1 (make generate).
func TestApplicationCRD(t *testing.T) {
	chart, err := os.ReadFile("flotilla/crds/applications.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(v1alpha1.CRD), string(chart)); diff != "" {
		t.Errorf("flotilla/crds/applications.yaml is not pkg/resources/v1alpha1's (-want +got):\n%s", diff)
	}
}

// applicationResources: the config's server.resources names the
// namespaces; the service account reads their Applications and writes
// their status there (a RoleBinding each, to one ClusterRole); the
// namespaces' editors and viewers get the Applications through the
// built-in roles' aggregation.
func TestApplicationResources(t *testing.T) {
	objs := renderIn(t, "testdata/values-applications.yaml", "flotilla")
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	raw, _, _ := unstructured.NestedString(byKey["ConfigMap/flotilla/flotilla-config"].Object, "data", "config.yaml")
	var cfg struct {
		Server struct {
			Resources map[string]any `json:"resources"`
		} `json:"server"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromYAML(t, `{namespaces: [team-a, team-b]}`), plain(t, cfg.Server.Resources)); diff != "" {
		t.Errorf("the config's server.resources (-want +got)\n%s", diff)
	}
	role := byKey["ClusterRole//flotilla-applications"]
	if role == nil {
		t.Fatalf("no ClusterRole flotilla-applications among %v", keysOf(byKey))
	}
	want := `[{apiGroups: [flotilla.dev], resources: [applications], verbs: [get, list, watch]},
	  {apiGroups: [flotilla.dev], resources: [applications/status], verbs: [get, patch, update]}]`
	if diff := cmp.Diff(fromYAML(t, want), plain(t, role.Object["rules"])); diff != "" {
		t.Errorf("the ClusterRole's rules (-want +got)\n%s", diff)
	}
	for _, ns := range []string{"team-a", "team-b"} {
		b := byKey["RoleBinding/"+ns+"/flotilla-applications"]
		if b == nil {
			t.Errorf("no RoleBinding in %s among %v", ns, keysOf(byKey))
			continue
		}
		if diff := cmp.Diff(fromYAML(t, `[{kind: ServiceAccount, name: flotilla, namespace: flotilla}]`), plain(t, b.Object["subjects"])); diff != "" {
			t.Errorf("%s's subjects (-want +got)\n%s", ns, diff)
		}
	}
	if byKey["ClusterRoleBinding//flotilla-applications"] != nil {
		t.Error("a ClusterRoleBinding reads every namespace's Applications, though the namespaces are listed")
	}
	for name, label := range map[string]string{"flotilla-applications-edit": "rbac.authorization.k8s.io/aggregate-to-edit", "flotilla-applications-view": "rbac.authorization.k8s.io/aggregate-to-view"} {
		r := byKey["ClusterRole//"+name]
		if r == nil || r.GetLabels()[label] != "true" {
			t.Errorf("ClusterRole %s is not aggregated by %s: %v", name, label, r)
		}
	}
}

func keysOf(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
