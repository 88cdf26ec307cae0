package cluster_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// kubeconfig writes a kubeconfig of one cluster at server with token and
// returns its path.
func kubeconfig(t *testing.T, name, server, token string) string {
	t.Helper()
	kc := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: `+token+`}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// Update adds, removes and changes clusters live; a kubeconfig that does
// not load changes nothing; the same kubeconfigs read again are no change.
func TestUpdate(t *testing.T) {
	a := config.Cluster{Name: "a", Kubeconfig: kubeconfig(t, "a", "https://a.test:6443", "ta")}
	b := config.Cluster{Name: "b", Kubeconfig: kubeconfig(t, "b", "https://b.test:6443", "tb")}
	set, err := cluster.NewSet([]config.Cluster{a, b})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()

	b2 := config.Cluster{Name: "b", Kubeconfig: kubeconfig(t, "b2", "https://b.test:6443", "rotated")}
	c := config.Cluster{Name: "c", Kubeconfig: kubeconfig(t, "c", "https://c.test:6443", "tc")}
	ch, err := set.Update([]config.Cluster{b2, c})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(cluster.Changes{Added: []string{"c"}, Removed: []string{"a"}, Changed: []string{"b"}}, ch); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, set.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, err := set.Config("a"); !fault.IsPermanent(err) {
		t.Errorf("Config(a) after its removal = %v, want a permanent error", err)
	}
	if cfg, err := set.Config("b"); err != nil || cfg.BearerToken != "rotated" {
		t.Errorf("Config(b) = %v, %v; want the rotated token", cfg, err)
	}
	if cfg, err := set.Config("c"); err != nil || cfg.Host != "https://c.test:6443" {
		t.Errorf("Config(c) = %v, %v; want c's server", cfg, err)
	}
	// A removed cluster is read no more (its reads fail at once, naming it).
	if _, err := set.Observe(t.Context(), "a", "default", config.Workload{Name: "web"}); !fault.IsPermanent(err) {
		t.Errorf("Observe of a removed cluster = %v, want a permanent error", err)
	}

	bad := config.Cluster{Name: "d", Kubeconfig: filepath.Join(t.TempDir(), "missing")}
	if _, err := set.Update([]config.Cluster{b2, c, bad}); err == nil || !fault.IsPermanent(err) {
		t.Errorf("Update with a missing kubeconfig = %v, want a permanent error", err)
	}
	if diff := cmp.Diff([]string{"b", "c"}, set.Names()); diff != "" {
		t.Errorf("a refused update changed the clusters (-want +got):\n%s", diff)
	}

	again := config.Cluster{Name: "c", Kubeconfig: kubeconfig(t, "c-copy", "https://c.test:6443", "tc")}
	if ch, err := set.Update([]config.Cluster{b2, again}); err != nil || !ch.Empty() {
		t.Errorf("Update with the same servers and users = %+v, %v; want no change", ch, err)
	}
}

// A cluster removed from the Set has its watch caches stopped; added
// again, it is read afresh.
func TestUpdateStopsTheWatchOfARemovedCluster(t *testing.T) {
	ctx, e := onCluster(t, "update")
	c, cl, ns, set := e.c, e.cl, e.ns, e.set
	create(ctx, t, cl, deployment(ns, "web", "web:2"), deployment(ns, "web-primary", "web:1"), suspendedCanary(ns, "web", "Deployment"))
	w := config.Workload{Name: "web", Container: "app"}
	if st := waitCached(ctx, t, set, c.Name, ns, w); st.PrimaryImage != "web:1" {
		t.Fatalf("cached primary %q, want web:1", st.PrimaryImage)
	}
	if _, err := set.Update(nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := set.CachedCanaryStatus(c.Name, ns, w); ok {
		t.Error("the cache of a removed cluster still answers")
	}
	// While it is out, its primary changes; added again, the cluster is
	// read afresh: its new cache syncs and sees the change. (The fleet's
	// deployment controller writes the Deployment's status meanwhile: a
	// conflict is read again.)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web-primary", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[1].Image = "web:2"
		_, err = cl.Kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := set.Update([]config.Cluster{{Name: c.Name, Kubeconfig: c.Kubeconfig}})
	if err != nil || len(ch.Added) != 1 {
		t.Fatalf("Update = %+v, %v; want the cluster added again", ch, err)
	}
	if st := waitCached(ctx, t, set, c.Name, ns, w); st.PrimaryImage != "web:2" {
		t.Errorf("cached primary %q after the cluster came back, want web:2", st.PrimaryImage)
	}
}
