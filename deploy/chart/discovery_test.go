package chart

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// clusterDiscovery.argocd: the config's fleet.discovery.argocd names the
// namespace and selector; the service account reads Secrets in that
// namespace only (a Role, not a ClusterRole).
func TestClusterDiscovery(t *testing.T) {
	objs := renderIn(t, "testdata/values-discovery.yaml", "flotilla")
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	raw, _, _ := unstructured.NestedString(byKey["ConfigMap/flotilla/flotilla-config"].Object, "data", "config.yaml")
	var cfg struct {
		Fleet struct {
			Discovery map[string]any `json:"discovery"`
		} `json:"fleet"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromYAML(t, `{argocd: {namespace: argo, selector: flotilla.dev/fleet=prod}}`), plain(t, cfg.Fleet.Discovery)); diff != "" {
		t.Errorf("the config's fleet.discovery (-want +got)\n%s", diff)
	}
	role := byKey["Role/argo/flotilla-cluster-discovery"]
	if role == nil {
		t.Fatalf("no Role flotilla-cluster-discovery in argo among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [""], resources: [secrets], verbs: [get, list, watch]}]`), plain(t, role.Object["rules"])); diff != "" {
		t.Errorf("the Role's rules (-want +got)\n%s", diff)
	}
	b := byKey["RoleBinding/argo/flotilla-cluster-discovery"]
	if b == nil {
		t.Fatalf("no RoleBinding in argo among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{kind: ServiceAccount, name: flotilla, namespace: flotilla}]`), plain(t, b.Object["subjects"])); diff != "" {
		t.Errorf("the RoleBinding's subjects (-want +got)\n%s", diff)
	}
}
