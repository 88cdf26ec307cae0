package discovery_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

const capiKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: prod-eu, cluster: {server: https://prod-eu.example.com}}]
users: [{name: admin, user: {token: t0ken}}]
contexts: [{name: prod-eu-admin@prod-eu, context: {cluster: prod-eu, user: admin}}]
current-context: prod-eu-admin@prod-eu
`

// capiSecret is Cluster API's kubeconfig Secret of cluster in fleet.
func capiSecret(cluster, kubeconfig string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: cluster + "-kubeconfig",
		Labels: map[string]string{discovery.LabelClusterName: cluster}},
		Type: discovery.SecretTypeClusterAPI, Data: map[string][]byte{discovery.ClusterAPIKubeconfigKey: []byte(kubeconfig)}}
}

// TestClusterAPICluster: a Cluster API Cluster with its kubeconfig Secret
// is a cluster named and labelled as the Cluster, reached with the
// Secret's kubeconfig; else an error says why it is none.
func TestClusterAPICluster(t *testing.T) {
	cluster := func(name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: map[string]string{"tier": "prod"}}}
	}
	deleting := cluster("prod-eu")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	otherType := capiSecret("prod-eu", capiKubeconfig)
	otherType.Type = corev1.SecretTypeOpaque
	otherLabel := capiSecret("prod-eu", capiKubeconfig)
	otherLabel.Labels[discovery.LabelClusterName] = "prod-us"
	for _, tc := range []struct {
		name    string
		cluster *metav1.PartialObjectMetadata
		secret  *corev1.Secret
		err     string
	}{
		{name: "the Cluster's name and labels, the Secret's kubeconfig", cluster: cluster("prod-eu"), secret: capiSecret("prod-eu", capiKubeconfig)},
		{name: "no Secret yet", cluster: cluster("prod-eu"), err: "fleet.discovery.clusterAPI: Cluster fleet/prod-eu: no kubeconfig Secret prod-eu-kubeconfig yet"},
		{name: "being deleted", cluster: deleting, secret: capiSecret("prod-eu", capiKubeconfig), err: "being deleted"},
		{name: "a Secret of another type", cluster: cluster("prod-eu"), secret: otherType, err: `is of type "Opaque"`},
		{name: "a Secret of another cluster", cluster: cluster("prod-eu"), secret: otherLabel, err: `cluster.x-k8s.io/cluster-name="prod-us"`},
		{name: "no kubeconfig", cluster: cluster("prod-eu"), secret: capiSecret("prod-eu", ""), err: "has no data.value"},
		{name: "no kubeconfig that parses", cluster: cluster("prod-eu"), secret: capiSecret("prod-eu", "clusters: 3"), err: "data.value"},
		{name: "no current context", cluster: cluster("prod-eu"), secret: capiSecret("prod-eu", strings.Replace(capiKubeconfig, "current-context: prod-eu-admin@prod-eu", "", 1)),
			err: `its current context "" names no cluster`},
		{name: "a name that is no DNS label", cluster: cluster("prod.eu"), secret: capiSecret("prod.eu", capiKubeconfig), err: `cluster name "prod.eu" is not a DNS label`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := discovery.ClusterAPICluster(tc.cluster, tc.secret)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := config.Cluster{Name: "prod-eu", Labels: map[string]string{"tier": "prod"}, Source: "fleet.discovery.clusterAPI: Cluster fleet/prod-eu",
				KubeconfigData: []byte(capiKubeconfig)}
			if diff := cmp.Diff(want, c); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			rc, err := kube.RESTConfigFromKubeconfig(c.KubeconfigData)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://prod-eu.example.com" || rc.BearerToken != "t0ken" {
				t.Errorf("reaches %s with token %q", rc.Host, rc.BearerToken)
			}
		})
	}
}

// TestSourceFollowsClusterAPI: Cluster API's Clusters and kubeconfig
// Secrets created, relabelled and deleted in the management cluster change
// the configuration in force: a Cluster whose Secret appears enters the
// wave its labels select, reached with the Secret's kubeconfig; one
// relabelled moves; one without its Secret, or deleted, goes; one of
// another namespace or selector is not read.
func TestSourceFollowsClusterAPI(t *testing.T) {
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := fleet.Clusters[0]
	if err := fleet.InstallCRDs(ctx, c.Name, localfleet.ClusterAPICRDs); err != nil {
		t.Fatal(err)
	}
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	ns := cl.Namespace(ctx, t, "capi")
	other := cl.Namespace(ctx, t, "elsewhere")
	kubeconfig, err := os.ReadFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	live, reg := follow(ctx, t, c.Kubeconfig, `{clusterAPI: {namespaces: [`+ns+`], selector: "fleet=flotilla"}}`, func(first *config.Config) (discovery.Inventory, error) {
		mc, err := metadata.NewForConfig(cl.Config)
		if err != nil {
			var none discovery.Inventory
			return none, err
		}
		return discovery.ClusterAPI(cl.Kube, mc, *first.Fleet.Discovery.ClusterAPI)
	})

	clusters := cl.Dynamic.Resource(discovery.ClusterAPIClusterResource)
	createCluster := func(namespace, name string, labels map[string]string) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "namespace": namespace}, "spec": map[string]any{}}}
		u.SetLabels(labels)
		if _, err := clusters.Namespace(namespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createSecret := func(namespace, name string) {
		t.Helper()
		s := capiSecret(name, string(kubeconfig))
		s.Namespace = namespace
		if _, err := cl.Kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waves := func(want map[string][]string) { t.Helper(); waitWaves(ctx, t, live, want) }

	createCluster(ns, "prod-eu", map[string]string{"fleet": "flotilla", "tier": "prod"})
	createCluster(ns, "not-ours", map[string]string{"tier": "prod"}) // another selector
	createSecret(ns, "not-ours")
	createCluster(other, "prod-us", map[string]string{"fleet": "flotilla", "tier": "prod"}) // another namespace
	createSecret(other, "prod-us")
	createCluster(ns, "prod-ap", map[string]string{"fleet": "flotilla", "tier": "prod"}) // its kubeconfig comes later
	createSecret(ns, "prod-eu")
	waves(map[string][]string{"canary": {"c1"}, "prod": {"prod-eu"}})
	gauges(ctx, t, reg, wantAllMetrics(0, 0, 0, 0, 1, 1))

	// The discovered cluster is reached with its Secret's kubeconfig.
	got, _ := live.Current().Cluster("prod-eu")
	if got.Source != "fleet.discovery.clusterAPI: Cluster "+ns+"/prod-eu" {
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
		t.Fatalf("reaching prod-eu with its kubeconfig: %v", err)
	}

	p, err := clusters.Namespace(ns).Get(ctx, "prod-eu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.SetLabels(map[string]string{"fleet": "flotilla", "tier": "canary"})
	if _, err := clusters.Namespace(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSecret(ns, "prod-ap")
	waves(map[string][]string{"canary": {"c1", "prod-eu"}, "prod": {"prod-ap"}})

	if err := cl.Kube.CoreV1().Secrets(ns).Delete(ctx, "prod-ap-kubeconfig", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := clusters.Namespace(ns).Delete(ctx, "prod-eu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waves(map[string][]string{"canary": {"c1"}, "prod": nil})
	// none found; prod-ap left out without its Secret.
	gauges(ctx, t, reg, wantAllMetrics(0, 0, 0, 0, 0, 1))
}

// gauges waits until the registry's gauges are want: the Clusters and
// their Secrets are watched apart, so a read may see one before the other.
func gauges(ctx context.Context, t *testing.T, reg *prometheus.Registry, want string) {
	t.Helper()
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want))
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
