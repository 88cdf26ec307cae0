package config

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func discoveryDoc(discovery string) string {
	return `
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}]
` + discovery + `
  waves:
    - {name: canary, selector: {matchLabels: {tier: canary}}}
    - {name: prod, selector: {matchLabels: {tier: prod}}}
applications:
  - {name: shop, image: registry.example.com/shop, workload: {name: shop}, service: {port: 80}, clusterSelector: {matchLabels: {team: shop}}}
`
}

// TestDiscovery: with fleet.discovery a wave or an application's selector
// that takes none of the file's clusters is no problem (the discovered
// ones come later); the discovered clusters join the file's after them,
// enter the waves their labels select, and their problems are reported at
// their source; one no wave selects is listed without a wave.
func TestDiscovery(t *testing.T) {
	dir := testDir(t)
	t.Run("without discovery, the prod wave selects nothing", func(t *testing.T) {
		_, _, err := LoadExtra(writeFile(t, filepath.Join(dir, "plain.yaml"), discoveryDoc("")), Extra{})
		if err == nil {
			t.Fatal("a wave that selects no cluster was taken")
		}
	})
	path := writeFile(t, filepath.Join(dir, "config.yaml"), discoveryDoc(`  discovery: {argocd: {selector: "fleet=flotilla", kubeconfig: c1.kubeconfig}}`))
	c, _, err := LoadExtra(path, Extra{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&ArgoCDDiscovery{Namespace: DefaultArgoCDNamespace, Selector: "fleet=flotilla", Kubeconfig: filepath.Join(dir, "c1.kubeconfig")},
		c.Fleet.Discovery.ArgoCD); diff != "" {
		t.Errorf("defaulted (-want +got):\n%s", diff)
	}
	kc := []byte("apiVersion: v1\nkind: Config\n")
	given := []Cluster{
		{Name: "prod-eu", Labels: map[string]string{"tier": "prod", "team": "shop"}, Source: "fleet.discovery.argocd: Secret argocd/prod-eu", KubeconfigData: kc},
		{Name: "lab", Labels: map[string]string{"tier": "lab"}, Source: "fleet.discovery.argocd: Secret argocd/lab", KubeconfigData: kc},
	}
	c, _, err = LoadExtra(path, Extra{Clusters: given})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"prod-eu"}, c.Fleet.Waves[1].ClusterNames()); diff != "" {
		t.Errorf("the prod wave (-want +got):\n%s", diff)
	}
	if _, ok := c.Cluster("lab"); !ok {
		t.Error("a discovered cluster no wave selects is not listed")
	}
	given[0].Labels["tier"] = "changed"
	if got, _ := c.Cluster("prod-eu"); got.Labels["tier"] != "prod" {
		t.Error("the configuration shares the labels of the clusters given")
	}

	_, _, err = LoadExtra(path, Extra{Clusters: []Cluster{{Name: "c1", Source: "fleet.discovery.argocd: Secret argocd/c1", KubeconfigData: kc}}})
	verr := (*ValidationError)(nil)
	if !errors.As(err, &verr) {
		t.Fatalf("a discovered cluster named as the file's: %v, want a validation error", err)
	}
	if diff := cmp.Diff([]Problem{{"fleet.discovery.argocd: Secret argocd/c1.name", `duplicate cluster name "c1" (first used by fleet.clusters[0])`}}, verr.Problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	const provider = `{name: token, execConfig: {command: /bin/token}}`
	for _, tc := range []struct{ discovery, want string }{
		{`  discovery: {}`, "fleet.discovery"},
		{`  discovery: {argocd: {selector: "fleet in (a"}}`, "fleet.discovery.argocd.selector"},
		{`  discovery: {argocd: {namespace: Argo_CD}}`, "fleet.discovery.argocd.namespace"},
		{`  discovery: {argocd: {kubeconfig: nope.kubeconfig}}`, "fleet.discovery.argocd.kubeconfig"},
		{`  discovery: {clusterProfiles: {}}`, "fleet.discovery.clusterProfiles.providers"},
		{`  discovery: {clusterAPI: {selector: "fleet in (a"}}`, "fleet.discovery.clusterAPI.selector"},
		{`  discovery: {clusterAPI: {namespaces: [Fleet_A]}}`, "fleet.discovery.clusterAPI.namespaces[0]"},
		{`  discovery: {clusterAPI: {kubeconfig: nope.kubeconfig}}`, "fleet.discovery.clusterAPI.kubeconfig"},
		{`  discovery: {clusterProfiles: {selector: "fleet in (a", providers: [` + provider + `]}}`, "fleet.discovery.clusterProfiles.selector"},
		{`  discovery: {clusterProfiles: {namespaces: [fleet, Fleet_A], providers: [` + provider + `]}}`, "fleet.discovery.clusterProfiles.namespaces[1]"},
		{`  discovery: {clusterProfiles: {kubeconfig: nope.kubeconfig, providers: [` + provider + `]}}`, "fleet.discovery.clusterProfiles.kubeconfig"},
		{`  discovery: {clusterProfiles: {providers: [` + provider + `, ` + provider + `]}}`, "fleet.discovery.clusterProfiles.providers[1].name"},
		{`  discovery: {clusterProfiles: {providers: [{name: token, execConfig: {args: [x]}}]}}`, "fleet.discovery.clusterProfiles.providers[0].execConfig.command"},
		{`  discovery: {clusterProfiles: {providers: [{name: "", execConfig: {command: t}}]}}`, "fleet.discovery.clusterProfiles.providers[0].name"},
		{`  discovery: {clusterProfiles: {providers: [{name: t, execConfig: {command: t, env: [{value: x}]}}]}}`, "fleet.discovery.clusterProfiles.providers[0].execConfig.env[0].name"},
		{`  discovery: {clusterProfiles: {providers: [{name: t, execConfig: {command: t}, profileSourcedCLIArgsPolicy: Prepend}]}}`, "fleet.discovery.clusterProfiles.providers[0].profileSourcedCLIArgsPolicy"},
		{`  discovery: {clusterProfiles: {providers: [{name: t, execConfig: {command: t}, profileSourcedEnvVarsPolicy: Append}]}}`, "fleet.discovery.clusterProfiles.providers[0].profileSourcedEnvVarsPolicy"},
	} {
		_, _, err := LoadExtra(writeFile(t, filepath.Join(dir, "bad.yaml"), discoveryDoc(tc.discovery)), Extra{})
		if !errors.As(err, &verr) || len(verr.Problems) != 1 || verr.Problems[0].Path != tc.want {
			t.Errorf("%s: %v, want one problem at %s", tc.discovery, err, tc.want)
		}
	}
}

// TestClusterProfileDiscovery: fleet.discovery.clusterProfiles and
// clusterAPI are read as written (their kubeconfig relative to the file),
// beside argocd, and the discovered clusters join the file's.
func TestClusterProfileDiscovery(t *testing.T) {
	dir := testDir(t)
	path := writeFile(t, filepath.Join(dir, "config.yaml"), discoveryDoc(`  discovery:
    argocd: {}
    clusterAPI: {namespaces: [capi], selector: fleet=flotilla, kubeconfig: c1.kubeconfig}
    clusterProfiles:
      namespaces: [fleet-a, fleet-b]
      selector: fleet=flotilla
      kubeconfig: c1.kubeconfig
      providers:
        - name: secretreader
          execConfig: {command: /bin/secretreader, args: [--ns, fleet], env: [{name: MODE, value: x}], provideClusterInfo: true, apiVersion: client.authentication.k8s.io/v1beta1, installHint: ask}
          profileSourcedCLIArgsPolicy: Append
          profileSourcedEnvVarsPolicy: Replace`))
	c, _, err := LoadExtra(path, Extra{Clusters: []Cluster{{Name: "prod-eu", Labels: map[string]string{"tier": "prod"},
		Source: "fleet.discovery.clusterProfiles: ClusterProfile fleet-a/prod-eu", KubeconfigData: []byte("apiVersion: v1\nkind: Config\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	want := &ClusterProfileDiscovery{Namespaces: []string{"fleet-a", "fleet-b"}, Selector: "fleet=flotilla", Kubeconfig: filepath.Join(dir, "c1.kubeconfig"),
		Providers: []AccessProvider{{Name: "secretreader", ExecConfig: ExecConfig{Command: "/bin/secretreader", Args: []string{"--ns", "fleet"},
			Env: []ExecEnvVar{{Name: "MODE", Value: "x"}}, ProvideClusterInfo: true, APIVersion: "client.authentication.k8s.io/v1beta1", InstallHint: "ask"},
			ProfileSourcedCLIArgsPolicy: "Append", ProfileSourcedEnvVarsPolicy: "Replace"}}}
	if diff := cmp.Diff(want, c.Fleet.Discovery.ClusterProfiles); diff != "" {
		t.Errorf("read (-want +got):\n%s", diff)
	}
	if c.Fleet.Discovery.ArgoCD == nil {
		t.Error("argocd beside clusterProfiles is dropped")
	}
	if diff := cmp.Diff(&ClusterAPIDiscovery{Namespaces: []string{"capi"}, Selector: "fleet=flotilla", Kubeconfig: filepath.Join(dir, "c1.kubeconfig")},
		c.Fleet.Discovery.ClusterAPI); diff != "" {
		t.Errorf("clusterAPI (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"prod-eu"}, c.Fleet.Waves[1].ClusterNames()); diff != "" {
		t.Errorf("the prod wave (-want +got):\n%s", diff)
	}
}
