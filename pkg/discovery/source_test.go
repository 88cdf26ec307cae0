package discovery_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is one cluster, the management cluster of the tests, started by
// TestMain unless the tests run -short; FLOTILLA_FLEET_DIR reuses a
// running fleet instead.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// TestSourceFollowsTheSecrets: Argo CD cluster Secrets created, relabelled
// and deleted in the management cluster change the configuration in force
// (through the one swap, pkg/reload): a cluster that appears enters the
// wave its labels select, one relabelled moves, one deleted goes; a
// Secret that is no cluster, or of another namespace or selector, is left
// out.
func TestSourceFollowsTheSecrets(t *testing.T) {
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := fleet.Clusters[0]
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	ns := cl.Namespace(ctx, t, "argocd")
	other := cl.Namespace(ctx, t, "elsewhere")

	live, reg := follow(ctx, t, c.Kubeconfig, `{argocd: {namespace: `+ns+`, selector: "fleet=flotilla"}}`, func(first *config.Config) (discovery.Inventory, error) {
		return discovery.ArgoCD(cl.Kube, *first.Fleet.Discovery.ArgoCD)
	})

	rc, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := json.Marshal(map[string]any{"bearerToken": rc.BearerToken, "tlsClientConfig": map[string]any{
		"caData": base64.StdEncoding.EncodeToString(rc.CAData), "insecure": rc.Insecure}})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(namespace, name, cluster string, labels map[string]string) *corev1.Secret {
		s := argoSecret(name, labels, map[string]string{"name": cluster, "server": rc.Host, "config": string(conf)})
		s.Namespace = namespace
		return s
	}
	create := func(s *corev1.Secret) {
		t.Helper()
		if _, err := cl.Kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// waves waits until the configuration in force has these waves.
	waves := func(want map[string][]string) { t.Helper(); waitWaves(ctx, t, live, want) }

	create(secret(ns, "cluster-prod-eu", "prod-eu", map[string]string{"fleet": "flotilla", "tier": "prod"}))
	create(secret(ns, "not-ours", "not-ours", map[string]string{"tier": "prod"}))                               // another selector
	create(secret(other, "cluster-prod-us", "prod-us", map[string]string{"fleet": "flotilla", "tier": "prod"})) // another namespace
	create(secret(ns, "bad-name", "Bad_Name", map[string]string{"fleet": "flotilla", "tier": "prod"}))          // no cluster
	waves(map[string][]string{"canary": {"c1"}, "prod": {"prod-eu"}})
	got, _ := live.Current().Cluster("prod-eu")
	if got.Source != "fleet.discovery.argocd: Secret "+ns+"/cluster-prod-eu" || got.KubeconfigData == nil {
		t.Errorf("prod-eu: source %q, kubeconfig %d bytes", got.Source, len(got.KubeconfigData))
	}

	s, err := cl.Kube.CoreV1().Secrets(ns).Get(ctx, "cluster-prod-eu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels["tier"] = "canary"
	if _, err := cl.Kube.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(secret(ns, "cluster-prod-ap", "prod-ap", map[string]string{"fleet": "flotilla", "tier": "prod"}))
	waves(map[string][]string{"canary": {"c1", "prod-eu"}, "prod": {"prod-ap"}})

	if err := cl.Kube.CoreV1().Secrets(ns).Delete(ctx, "cluster-prod-eu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waves(map[string][]string{"canary": {"c1"}, "prod": {"prod-ap"}})
	// prod-ap is found; bad-name is left out (not-ours and prod-us are not
	// the source's to read).
	if err := testutil.GatherAndCompare(reg, strings.NewReader(wantMetrics(1, 1, 0, 0))); err != nil {
		t.Error(err)
	}
}

// wantMetrics is the discovery's gauges as Prometheus' text format: the
// clusters found and entries left out of Argo CD's Secrets and of the
// ClusterProfiles.
func wantMetrics(argoFound, argoLeft, profilesFound, profilesLeft int) string {
	return wantAllMetrics(argoFound, argoLeft, profilesFound, profilesLeft, 0, 0)
}

// wantAllMetrics is wantMetrics with Cluster API's Clusters.
func wantAllMetrics(argoFound, argoLeft, profilesFound, profilesLeft, capiFound, capiLeft int) string {
	return fmt.Sprintf(`
# HELP flotilla_discovered_clusters Clusters the discovery source found, as it last read them (fleet.discovery; source argocd: Argo CD's cluster Secrets, clusterprofile: the ClusterProfiles, clusterapi: Cluster API's Clusters).
# TYPE flotilla_discovered_clusters gauge
flotilla_discovered_clusters{source="argocd"} %d
flotilla_discovered_clusters{source="clusterapi"} %d
flotilla_discovered_clusters{source="clusterprofile"} %d
# HELP flotilla_discovery_left_out Inventory entries the discovery source read that are no cluster (a Secret without a server, a ClusterProfile whose control plane is not healthy or that lists no configured access provider, a Cluster API Cluster without its kubeconfig Secret, a name that is no DNS label, a name an older entry has), left out; the log says why.
# TYPE flotilla_discovery_left_out gauge
flotilla_discovery_left_out{source="argocd"} %d
flotilla_discovery_left_out{source="clusterapi"} %d
flotilla_discovery_left_out{source="clusterprofile"} %d
`, argoFound, capiFound, profilesFound, argoLeft, capiLeft, profilesLeft)
}
