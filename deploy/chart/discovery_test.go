package chart

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// clusterDiscovery.argocd and .clusterProfiles: the config's
// fleet.discovery names their namespaces, selectors and providers; the
// service account reads Secrets in Argo CD's namespace only,
// ClusterProfiles in the namespaces named only, and Cluster API's Clusters
// and Secrets in theirs (Roles, not ClusterRoles).
func TestClusterDiscovery(t *testing.T) {
	byKey := rendered(t, "testdata/values-discovery.yaml")
	if diff := cmp.Diff(fromYAML(t, `{argocd: {namespace: argo, selector: flotilla.dev/fleet=prod},
  clusterProfiles: {namespaces: [fleet-a, fleet-b], selector: flotilla.dev/fleet=prod, providers: [
    {name: secretreader, execConfig: {command: /usr/local/bin/secretreader-plugin, provideClusterInfo: true}, profileSourcedEnvVarsPolicy: AppendIfNotExists}]},
  clusterAPI: {namespaces: [capi], selector: flotilla.dev/fleet=prod}}`),
		configSection(t, byKey, "fleet", "discovery")); diff != "" {
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
	for _, ns := range []string{"fleet-a", "fleet-b"} {
		role := byKey["Role/"+ns+"/flotilla-cluster-profiles"]
		if role == nil {
			t.Fatalf("no Role flotilla-cluster-profiles in %s among %v", ns, keysOf(byKey))
		}
		if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [multicluster.x-k8s.io], resources: [clusterprofiles], verbs: [get, list, watch]}]`), plain(t, role.Object["rules"])); diff != "" {
			t.Errorf("the Role's rules in %s (-want +got)\n%s", ns, diff)
		}
		b := byKey["RoleBinding/"+ns+"/flotilla-cluster-profiles"]
		if b == nil {
			t.Fatalf("no RoleBinding flotilla-cluster-profiles in %s among %v", ns, keysOf(byKey))
		}
		if diff := cmp.Diff(fromYAML(t, `{apiGroup: rbac.authorization.k8s.io, kind: Role, name: flotilla-cluster-profiles}`), plain(t, b.Object["roleRef"])); diff != "" {
			t.Errorf("the RoleBinding's roleRef in %s (-want +got)\n%s", ns, diff)
		}
	}
	if o := byKey["ClusterRole//flotilla-cluster-profiles"]; o != nil {
		t.Error("a ClusterRole for ClusterProfiles of named namespaces")
	}
	capi := byKey["Role/capi/flotilla-cluster-api"]
	if capi == nil {
		t.Fatalf("no Role flotilla-cluster-api in capi among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [cluster.x-k8s.io], resources: [clusters], verbs: [get, list, watch]}, {apiGroups: [""], resources: [secrets], verbs: [get, list, watch]}]`),
		plain(t, capi.Object["rules"])); diff != "" {
		t.Errorf("the Cluster API Role's rules (-want +got)\n%s", diff)
	}
	if byKey["RoleBinding/capi/flotilla-cluster-api"] == nil {
		t.Fatalf("no RoleBinding flotilla-cluster-api in capi among %v", keysOf(byKey))
	}
}

// clusterDiscovery.clusterProfiles and .clusterAPI without namespaces:
// ClusterProfiles, and Clusters with their Secrets, of every namespace,
// read through ClusterRoles.
func TestClusterProfilesOfEveryNamespace(t *testing.T) {
	byKey := rendered(t, "testdata/values-cluster-profiles.yaml")
	if diff := cmp.Diff(fromYAML(t, `{clusterProfiles: {namespaces: [], selector: "", providers: [{name: token, execConfig: {command: /usr/local/bin/token-plugin}}]},
  clusterAPI: {namespaces: [], selector: ""}}`),
		configSection(t, byKey, "fleet", "discovery")); diff != "" {
		t.Errorf("the config's fleet.discovery (-want +got)\n%s", diff)
	}
	role := byKey["ClusterRole//flotilla-cluster-profiles"]
	if role == nil {
		t.Fatalf("no ClusterRole flotilla-cluster-profiles among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{apiGroups: [multicluster.x-k8s.io], resources: [clusterprofiles], verbs: [get, list, watch]}]`), plain(t, role.Object["rules"])); diff != "" {
		t.Errorf("the ClusterRole's rules (-want +got)\n%s", diff)
	}
	b := byKey["ClusterRoleBinding//flotilla-cluster-profiles"]
	if b == nil {
		t.Fatalf("no ClusterRoleBinding among %v", keysOf(byKey))
	}
	if diff := cmp.Diff(fromYAML(t, `[{kind: ServiceAccount, name: flotilla, namespace: flotilla}]`), plain(t, b.Object["subjects"])); diff != "" {
		t.Errorf("the ClusterRoleBinding's subjects (-want +got)\n%s", diff)
	}
	if byKey["ClusterRole//flotilla-cluster-api"] == nil || byKey["ClusterRoleBinding//flotilla-cluster-api"] == nil {
		t.Errorf("no ClusterRole and ClusterRoleBinding flotilla-cluster-api among %v", keysOf(byKey))
	}
	if byKey["Role/argo/flotilla-cluster-discovery"] != nil {
		t.Error("a Role for Argo CD's Secrets without clusterDiscovery.argocd")
	}
}
