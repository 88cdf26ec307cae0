package discovery_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// profile is a ClusterProfile of the YAML doc.
func profile(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestProfileCluster: a ClusterProfile becomes a cluster as the
// cluster-inventory-api's pkg/access builds its client: the server and CA
// of the first configured provider it lists, that provider's exec plugin
// with what the ClusterProfile's extensions add as the policies allow; or
// an error saying why it is no cluster.
func TestProfileCluster(t *testing.T) {
	type want struct {
		Name, Server, TLSServerName string
		CA                          string
		Labels                      map[string]string
		Command                     string
		Args                        []string
		Env                         map[string]string
		APIVersion                  string
		ClusterInfo                 bool
		Extensions                  []string
	}
	token := config.AccessProvider{Name: "token", ExecConfig: config.ExecConfig{Command: "/bin/token", Args: []string{"--for"},
		Env: []config.ExecEnvVar{{Name: "MODE", Value: "plugin"}}}}
	kubelogin := config.AccessProvider{Name: "kubelogin", ExecConfig: config.ExecConfig{Command: "kubelogin", APIVersion: "client.authentication.k8s.io/v1beta1", ProvideClusterInfo: true}}
	withPolicies := func(p config.AccessProvider, args, env string) config.AccessProvider {
		p.ProfileSourcedCLIArgsPolicy, p.ProfileSourcedEnvVarsPolicy = args, env
		return p
	}
	const head = `
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: prod-eu, namespace: fleet, labels: {tier: prod}}
spec: {clusterManager: {name: ocm}}
`
	// extensions are a provider's cluster with the KEP-5339 extensions.
	const extensions = head + `
status:
  accessProviders:
  - name: token
    cluster:
      server: https://prod-eu.example.com
      extensions:
      - {name: clusterprofiles.multicluster.x-k8s.io/exec/additional-args, extension: ["--cluster", "prod-eu"]}
      - {name: clusterprofiles.multicluster.x-k8s.io/exec/additional-envs, extension: {MODE: profile, REGION: eu}}
`
	base := want{Name: "prod-eu", Server: "https://prod-eu.example.com", Labels: map[string]string{"tier": "prod"},
		Command: "/bin/token", Args: []string{"--for"}, Env: map[string]string{"MODE": "plugin"}, APIVersion: "client.authentication.k8s.io/v1"}
	with := func(f func(*want)) want {
		w := base
		f(&w)
		return w
	}
	for _, tc := range []struct {
		name      string
		doc       string
		providers []config.AccessProvider
		want      want
		err       string
	}{
		{name: "the provider's server, CA and plugin; the ClusterProfile's name and labels", providers: []config.AccessProvider{token}, doc: head + `
status:
  conditions: [{type: ControlPlaneHealthy, status: "True", reason: Healthy, message: "", lastTransitionTime: "2026-12-01T00:00:00Z"}]
  accessProviders:
  - name: token
    cluster: {server: https://prod-eu.example.com, certificate-authority-data: Q0EtREFUQQ==, tls-server-name: api.prod-eu}
`, want: with(func(w *want) { w.CA, w.TLSServerName = "CA-DATA", "api.prod-eu" })},
		{name: "the first configured provider the ClusterProfile lists", providers: []config.AccessProvider{kubelogin, token}, doc: head + `
status:
  accessProviders:
  - {name: token, cluster: {server: https://token.example.com}}
  - {name: kubelogin, cluster: {server: https://prod-eu.example.com}}
`, want: with(func(w *want) {
			w.Command, w.Args, w.Env, w.APIVersion, w.ClusterInfo = "kubelogin", nil, nil, "client.authentication.k8s.io/v1beta1", true
		})},
		{name: "the deprecated credentialProviders, accessProviders overriding a name", providers: []config.AccessProvider{kubelogin, token}, doc: head + `
status:
  credentialProviders:
  - {name: kubelogin, cluster: {server: https://old.example.com}}
  - {name: token, cluster: {server: https://token.example.com}}
  accessProviders:
  - {name: kubelogin, cluster: {server: https://prod-eu.example.com}}
`, want: with(func(w *want) {
			w.Command, w.Args, w.Env, w.APIVersion, w.ClusterInfo = "kubelogin", nil, nil, "client.authentication.k8s.io/v1beta1", true
		})},
		{name: "only credentialProviders", providers: []config.AccessProvider{token}, doc: head + `
status:
  credentialProviders: [{name: token, cluster: {server: https://prod-eu.example.com}}]
`, want: base},
		{name: "extensions ignored by default", providers: []config.AccessProvider{token}, doc: extensions,
			want: with(func(w *want) {
				w.Extensions = []string{discovery.ExtensionAdditionalArgs, discovery.ExtensionAdditionalEnvs}
			})},
		{name: "extensions appended, the plugin's variables kept", providers: []config.AccessProvider{withPolicies(token, "Append", "AppendIfNotExists")}, doc: extensions,
			want: with(func(w *want) {
				w.Args, w.Env = []string{"--for", "--cluster", "prod-eu"}, map[string]string{"MODE": "plugin", "REGION": "eu"}
				w.Extensions = []string{discovery.ExtensionAdditionalArgs, discovery.ExtensionAdditionalEnvs}
			})},
		{name: "the ClusterProfile's variables replacing the plugin's", providers: []config.AccessProvider{withPolicies(token, "Ignore", "Replace")}, doc: extensions,
			want: with(func(w *want) {
				w.Env = map[string]string{"MODE": "profile", "REGION": "eu"}
				w.Extensions = []string{discovery.ExtensionAdditionalArgs, discovery.ExtensionAdditionalEnvs}
			})},
		{name: "the exec extension kept for the plugin's cluster info", providers: []config.AccessProvider{token}, doc: head + `
status:
  accessProviders:
  - name: token
    cluster:
      server: https://prod-eu.example.com
      extensions: [{name: client.authentication.k8s.io/exec, extension: {audience: prod-eu}}]
`, want: with(func(w *want) { w.Extensions = []string{"client.authentication.k8s.io/exec"} })},
		{name: "a control plane of unknown health is a cluster", providers: []config.AccessProvider{token}, doc: head + `
status:
  conditions: [{type: ControlPlaneHealthy, status: Unknown, reason: NoReport, message: "", lastTransitionTime: "2026-12-01T00:00:00Z"}]
  accessProviders: [{name: token, cluster: {server: https://prod-eu.example.com}}]
`, want: base},
		{name: "an unhealthy control plane is left out", providers: []config.AccessProvider{token}, doc: head + `
status:
  conditions: [{type: ControlPlaneHealthy, status: "False", reason: APIServerDown, message: "no answer for 5m", lastTransitionTime: "2026-12-01T00:00:00Z"}]
  accessProviders: [{name: token, cluster: {server: https://prod-eu.example.com}}]
`, err: "fleet.discovery.clusterProfiles: ClusterProfile fleet/prod-eu: condition ControlPlaneHealthy is False (APIServerDown: no answer for 5m)"},
		{name: "no configured provider", providers: []config.AccessProvider{token}, doc: head + `
status:
  accessProviders: [{name: kubelogin, cluster: {server: https://prod-eu.example.com}}, {name: gke, cluster: {server: https://prod-eu.example.com}}]
`, err: "lists no access provider of fleet.discovery.clusterProfiles.providers (it lists gke, kubelogin)"},
		{name: "no status yet", providers: []config.AccessProvider{token}, doc: head,
			err: "lists no access provider of fleet.discovery.clusterProfiles.providers (it lists )"},
		{name: "no server", providers: []config.AccessProvider{token}, doc: head + `
status:
  accessProviders: [{name: token, cluster: {certificate-authority-data: Q0EtREFUQQ==}}]
`, err: "access provider token: its cluster has no server"},
		{name: "arguments that are no list", providers: []config.AccessProvider{withPolicies(token, "Append", "")}, doc: head + `
status:
  accessProviders:
  - name: token
    cluster:
      server: https://prod-eu.example.com
      extensions: [{name: clusterprofiles.multicluster.x-k8s.io/exec/additional-args, extension: {a: b}}]
`, err: "extension clusterprofiles.multicluster.x-k8s.io/exec/additional-args"},
		{name: "a name that is no DNS label", providers: []config.AccessProvider{token},
			doc: strings.Replace(head, "name: prod-eu,", "name: prod.eu,", 1) + `
status:
  accessProviders: [{name: token, cluster: {server: https://prod-eu.example.com}}]
`, err: `cluster name "prod.eu" is not a DNS label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := discovery.ProfileCluster(profile(t, tc.doc), tc.providers)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kc, err := clientcmd.Load(c.KubeconfigData)
			if err != nil {
				t.Fatal(err)
			}
			ctx := kc.Contexts[kc.CurrentContext]
			cl, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
			got := want{Name: c.Name, Server: cl.Server, TLSServerName: cl.TLSServerName, CA: string(cl.CertificateAuthorityData), Labels: c.Labels}
			for k := range cl.Extensions {
				got.Extensions = append(got.Extensions, k)
			}
			if e := user.Exec; e != nil {
				got.Command, got.Args, got.APIVersion, got.ClusterInfo = e.Command, e.Args, e.APIVersion, e.ProvideClusterInfo
				for _, v := range e.Env {
					if got.Env == nil {
						got.Env = map[string]string{}
					}
					got.Env[v.Name] = v.Value
				}
			}
			if c.Source != "fleet.discovery.clusterProfiles: ClusterProfile fleet/prod-eu" {
				t.Errorf("source %q", c.Source)
			}
			if diff := cmp.Diff(tc.want, got, sortStrings); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// sortStrings compares the kubeconfig's extensions as a set.
var sortStrings = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Extensions" },
	cmp.Transformer("sorted", func(s []string) []string {
		out := append([]string(nil), s...)
		slices.Sort(out)
		return out
	}))

// TestSourceFollowsTheClusterProfiles: ClusterProfiles created,
// relabelled, marked unhealthy and deleted in the management cluster
// change the configuration in force: a cluster that appears enters the
// wave its labels select, reached with the credentials its provider's
// exec plugin gives; one relabelled moves; one whose control plane is not
// healthy, or deleted, goes; one of another namespace or selector is not
// read.
func TestSourceFollowsTheClusterProfiles(t *testing.T) {
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := fleet.Clusters[0]
	if err := fleet.InstallCRDs(ctx, c.Name, localfleet.ClusterProfileCRDs); err != nil {
		t.Fatal(err)
	}
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	ns := cl.Namespace(ctx, t, "inventory")
	other := cl.Namespace(ctx, t, "elsewhere")
	rc, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	// The provider's plugin prints the credential kept for the cluster the
	// ClusterProfile names in its additional-envs extension, as upstream's
	// secretreader plugin reads one kept for it. (Not additional-args: the
	// CRD takes an extension that is an object only, which a list of
	// arguments is not.)
	creds := t.TempDir()
	cred, err := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]any{"token": rc.BearerToken}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"prod-eu", "prod-ap"} {
		if err := os.WriteFile(filepath.Join(creds, n+".json"), cred, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	providers, err := json.Marshal([]map[string]any{{"name": "fleet-token", "profileSourcedEnvVarsPolicy": "AppendIfNotExists",
		"execConfig": map[string]any{"command": "/bin/sh", "args": []string{"-c", `cat "$CREDS/$CLUSTER.json"`},
			"env": []map[string]string{{"name": "CREDS", "value": creds}}}}})
	if err != nil {
		t.Fatal(err)
	}
	live, reg := follow(ctx, t, c.Kubeconfig, `{clusterProfiles: {namespaces: [`+ns+`], selector: "fleet=flotilla", providers: `+string(providers)+`}}`, func(first *config.Config) (discovery.Inventory, error) {
		return discovery.ClusterProfiles(cl.Dynamic, *first.Fleet.Discovery.ClusterProfiles)
	})

	profiles := cl.Dynamic.Resource(discovery.ClusterProfileResource)
	// create creates a ClusterProfile of the cluster the test reaches,
	// listing the fleet-token provider, its status as a cluster manager
	// writes it.
	create := func(namespace, name string, labels map[string]string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
			"metadata": map[string]any{"name": name, "namespace": namespace},
			"spec":     map[string]any{"displayName": name, "clusterManager": map[string]any{"name": "test"}},
		}}
		u.SetLabels(labels)
		got, err := profiles.Namespace(namespace).Create(ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cluster := map[string]any{"server": rc.Host, "insecure-skip-tls-verify": rc.Insecure,
			"extensions": []any{map[string]any{"name": discovery.ExtensionAdditionalEnvs, "extension": map[string]any{"CLUSTER": name}}}}
		if len(rc.CAData) > 0 {
			cluster["certificate-authority-data"] = base64.StdEncoding.EncodeToString(rc.CAData)
		}
		got.Object["status"] = map[string]any{"accessProviders": []any{map[string]any{"name": "fleet-token", "cluster": cluster}}}
		if _, err := profiles.Namespace(namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waves := func(want map[string][]string) { t.Helper(); waitWaves(ctx, t, live, want) }

	create(ns, "prod-eu", map[string]string{"fleet": "flotilla", "tier": "prod"})
	create(ns, "not-ours", map[string]string{"tier": "prod"})                        // another selector
	create(other, "prod-us", map[string]string{"fleet": "flotilla", "tier": "prod"}) // another namespace
	waves(map[string][]string{"canary": {"c1"}, "prod": {"prod-eu"}})

	// The discovered cluster is reached with what the plugin gives.
	got, _ := live.Current().Cluster("prod-eu")
	if got.Source != "fleet.discovery.clusterProfiles: ClusterProfile "+ns+"/prod-eu" {
		t.Errorf("prod-eu: source %q", got.Source)
	}
	crc, err := kube.RESTConfigFromKubeconfig(got.KubeconfigData)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := kubernetes.NewForConfig(crc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("reaching prod-eu with its provider's credentials: %v", err)
	}

	p, err := profiles.Namespace(ns).Get(ctx, "prod-eu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetLabels(map[string]string{"fleet": "flotilla", "tier": "canary"})
	if _, err := profiles.Namespace(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(ns, "prod-ap", map[string]string{"fleet": "flotilla", "tier": "prod"})
	waves(map[string][]string{"canary": {"c1", "prod-eu"}, "prod": {"prod-ap"}})

	// prod-ap's control plane is reported unhealthy: it leaves.
	p, err = profiles.Namespace(ns).Get(ctx, "prod-ap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(p.Object, []any{map[string]any{"type": discovery.ConditionControlPlaneHealthy, "status": "False",
		"reason": "APIServerDown", "message": "no answer", "lastTransitionTime": "2026-12-01T00:00:00Z"}}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	if _, err := profiles.Namespace(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waves(map[string][]string{"canary": {"c1", "prod-eu"}, "prod": nil})

	if err := profiles.Namespace(ns).Delete(ctx, "prod-eu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waves(map[string][]string{"canary": {"c1"}, "prod": nil})
	// none found; prod-ap left out (not-ours and prod-us are not the
	// source's to read).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantMetrics(0, 0, 0, 1))); err != nil {
		t.Error(err)
	}
}
