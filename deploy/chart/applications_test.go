package chart

import (
	"os"
	"strings"
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
	byKey := rendered(t, "testdata/values-applications.yaml")
	if diff := cmp.Diff(fromYAML(t, `{namespaces: [team-a, team-b]}`), configSection(t, byKey, "server", "resources")); diff != "" {
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

// rendered renders the chart with the values file in namespace flotilla
// and indexes its objects by kind/namespace/name.
func rendered(t *testing.T, values string) map[string]*unstructured.Unstructured {
	t.Helper()
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range renderIn(t, values, "flotilla") {
		byKey[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return byKey
}

// configSection is the section at path (e.g. "server", "resources") of the
// flotilla config the rendered ConfigMap carries, as plain JSON values.
func configSection(t *testing.T, byKey map[string]*unstructured.Unstructured, path ...string) any {
	t.Helper()
	cm := byKey["ConfigMap/flotilla/flotilla-config"]
	if cm == nil {
		t.Fatalf("no ConfigMap flotilla-config among %v", keysOf(byKey))
	}
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "config.yaml")
	var v any
	if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return plain(t, v)
}

func keysOf(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The chart's Cluster and WavePolicy CRDs are the ones controller-gen
// writes.
func TestPlatformCRDs(t *testing.T) {
	for file, crd := range map[string][]byte{"flotilla/crds/clusters.yaml": v1alpha1.ClusterCRD, "flotilla/crds/wavepolicies.yaml": v1alpha1.WavePolicyCRD} {
		chart, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(crd), string(chart)); diff != "" {
			t.Errorf("%s is not pkg/resources/v1alpha1's (-want +got):\n%s", file, diff)
		}
	}
}

// applicationResources.platformNamespaces: the config names them; the
// service account reads the Clusters of every watched namespace (the
// teams' ones to say they are not honoured there) and the Secrets of the
// platform's; the Clusters' editor is a ClusterRole aggregated nowhere,
// while their viewers are the namespaces'.
func TestClusterResources(t *testing.T) {
	byKey := rendered(t, "testdata/values-platform.yaml")
	if diff := cmp.Diff(fromYAML(t, `{namespaces: [team-a, team-b], platformNamespaces: [platform]}`), configSection(t, byKey, "server", "resources")); diff != "" {
		t.Errorf("the config's server.resources (-want +got)\n%s", diff)
	}
	want := `[{apiGroups: [flotilla.dev], resources: [applications], verbs: [get, list, watch]},
	  {apiGroups: [flotilla.dev], resources: [applications/status], verbs: [get, patch, update]},
	  {apiGroups: [flotilla.dev], resources: [clusters, wavepolicies], verbs: [get, list, watch]},
	  {apiGroups: [flotilla.dev], resources: [clusters/status, wavepolicies/status], verbs: [get, patch, update]}]`
	if role := byKey["ClusterRole//flotilla-applications"]; role == nil {
		t.Fatalf("no ClusterRole flotilla-applications among %v", keysOf(byKey))
	} else if diff := cmp.Diff(fromYAML(t, want), plain(t, role.Object["rules"])); diff != "" {
		t.Errorf("the ClusterRole's rules (-want +got)\n%s", diff)
	}
	for _, ns := range []string{"team-a", "team-b", "platform"} {
		if byKey["RoleBinding/"+ns+"/flotilla-applications"] == nil {
			t.Errorf("no RoleBinding flotilla-applications in %s among %v", ns, keysOf(byKey))
		}
	}
	secrets := byKey["Role/platform/flotilla-cluster-secrets"]
	if secrets == nil || byKey["RoleBinding/platform/flotilla-cluster-secrets"] == nil {
		t.Fatalf("no Role and RoleBinding flotilla-cluster-secrets in platform among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [""], resources: [secrets], verbs: [get, list, watch]}]`), plain(t, secrets.Object["rules"])); diff != "" {
		t.Errorf("the Secrets' Role (-want +got)\n%s", diff)
	}
	if byKey["Role/team-a/flotilla-cluster-secrets"] != nil {
		t.Error("flotilla reads the Secrets of a team's namespace")
	}
	edit := byKey["ClusterRole//flotilla-platform-edit"]
	if edit == nil {
		t.Fatalf("no ClusterRole flotilla-platform-edit among %v", keysOf(byKey))
	}
	for k := range edit.GetLabels() {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			t.Errorf("the platform's editor is aggregated (%s): a team's namespace editor could add clusters", k)
		}
	}
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [flotilla.dev], resources: [clusters, wavepolicies], verbs: [get, list, watch, create, update, patch, delete, deletecollection]},
	  {apiGroups: [flotilla.dev], resources: [clusters/status, wavepolicies/status], verbs: [get, list, watch]}]`), plain(t, edit.Object["rules"])); diff != "" {
		t.Errorf("the platform editor's rules (-want +got)\n%s", diff)
	}
	view := byKey["ClusterRole//flotilla-applications-view"]
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [flotilla.dev], resources: [applications, applications/status, clusters, clusters/status, wavepolicies, wavepolicies/status], verbs: [get, list, watch]}]`),
		plain(t, view.Object["rules"])); diff != "" {
		t.Errorf("the viewer's rules (-want +got)\n%s", diff)
	}
}
