package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// clustersDoc is a file whose fleet has the clusters given (YAML flow
// entries), in the waves their labels select.
func clustersDoc(clusters string) string {
	return `
server:
  listen: 127.0.0.1:0
  dataDir: data
  apiToken: {env: FLOTILLA_TEST_API_TOKEN}
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_SERVER_TEST_SECRET}}
fleet:
  clusters:
` + clusters + `
  waves:
    - {name: canary, selector: {matchLabels: {tier: canary}}}
    - {name: prod, selector: {matchLabels: {tier: prod}}}
applications:
` + podinfoApp
}

// TestReloadChangesTheClusters: clusters added and removed in the file
// change the running server's clients and waves without a restart; a
// removed cluster leaves the rollout in flight, which ends with the
// clusters that remain; a cluster whose kubeconfig does not load is
// refused, the clusters staying as they were.
func TestReloadChangesTheClusters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flotilla.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "c1.kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOTILLA_SERVER_TEST_SECRET", "q9X/3vT+k2==")
	t.Setenv("FLOTILLA_TEST_API_TOKEN", testToken)
	const (
		c1 = "    - {name: c1, kubeconfig: c1.kubeconfig, labels: {tier: canary}}\n"
		c2 = "    - {name: c2, kubeconfig: c1.kubeconfig, labels: {tier: prod}}\n"
		c3 = "    - {name: c3, kubeconfig: c1.kubeconfig, labels: {tier: prod}}\n"
	)
	write(clustersDoc(c1 + c2 + c3))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := runServer(t, cfg, Options{NoPrune: true, ConfigFile: path})
	// The last wave of a rollout in flight: c2 done, c3 under analysis.
	if _, err := s.repo.Create(t.Context(), rollout.Rollout{ID: "r1", Application: "podinfo", Phase: rollout.Progressing, Wave: 1,
		Image: "registry.example.com/demo/podinfo", Tag: "1.1.0", Digest: "sha256:new",
		Waves: []rollout.Wave{
			{Name: "canary", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterSucceeded}}},
			{Name: "prod", Clusters: []rollout.Cluster{{Name: "c2", Phase: rollout.ClusterSucceeded}, {Name: "c3", Phase: rollout.ClusterProgressing}}},
		}}); err != nil {
		t.Fatal(err)
	}

	write(clustersDoc(c1 + c2))
	if res := s.Reload(t.Context(), path); res.Outcome != reload.Applied {
		t.Fatalf("removing c3: %s (%v %v)", res.Outcome, res.Err, res.Fields)
	}
	if diff := cmp.Diff([]string{"c1", "c2"}, s.clusters.Names()); diff != "" {
		t.Errorf("clients after removing c3 (-want +got):\n%s", diff)
	}
	var ro rollout.Rollout
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if ro, err = s.repo.Get(t.Context(), "r1"); err == nil && ro.Phase.Done() {
			break
		}
	}
	c, _, _ := ro.Cluster("c3")
	if ro.Phase != rollout.Succeeded || c == nil || c.Phase != rollout.ClusterRemoved {
		t.Fatalf("rollout r1 %s (%s), c3 %+v; want it succeeded with c3 removed", ro.Phase, ro.Reason, c)
	}

	// A kubeconfig that exists but names no cluster: the file validates,
	// the client cannot be made.
	if err := os.WriteFile(filepath.Join(dir, "empty.kubeconfig"), []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(clustersDoc(c1 + c2 + "    - {name: c4, kubeconfig: empty.kubeconfig, labels: {tier: prod}}\n"))
	if res := s.Reload(t.Context(), path); res.Outcome != reload.Invalid || !strings.Contains(res.Err.Error(), "fleet.clusters[c4]") {
		t.Errorf("adding c4 with an empty kubeconfig: %s (%v), want invalid naming fleet.clusters[c4]", res.Outcome, res.Err)
	}
	if diff := cmp.Diff([]string{"c1", "c2"}, s.clusters.Names()); diff != "" {
		t.Errorf("clients after a refused reload (-want +got):\n%s", diff)
	}
	write(clustersDoc(c1 + c2 + "    - {name: c4, kubeconfig: c1.kubeconfig, labels: {tier: prod}}\n"))
	if res := s.Reload(t.Context(), path); res.Outcome != reload.Applied {
		t.Fatalf("adding c4: %s (%v %v)", res.Outcome, res.Err, res.Fields)
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c4"}, s.clusters.Names()); diff != "" {
		t.Errorf("clients after adding c4 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c2", "c4"}, s.live.Current().Fleet.Waves[1].ClusterNames()); diff != "" {
		t.Errorf("the prod wave after adding c4 (-want +got):\n%s", diff)
	}
}
