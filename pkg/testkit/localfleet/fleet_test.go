package localfleet

import (
	"context"
	"os"
	"testing"

	"time"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestUpLoadDown starts a real one-cluster fleet (no Tekton), reads it back
// from its directory as `fleet status` does, and stops it.
func TestUpLoadDown(t *testing.T) {
	if err := (binaries{dir: BinDir()}).check(Options{}); err != nil {
		t.Fatalf("%v\n(make test builds them first)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	f, err := Up(ctx, Options{Dir: dir, Clusters: 1, DieWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Down(context.Background()) })

	if _, err := Up(ctx, Options{Dir: dir, Clusters: 1, DieWithParent: true}); err == nil {
		t.Error("a second Up in the same dir succeeded, want an error")
	}

	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Running() {
		t.Fatal("loaded fleet is not running")
	}
	var names []string
	for _, p := range loaded.Processes() {
		names = append(names, p.Name)
	}
	want := []string{"c1-kube-apiserver", "c1-kube-controller-manager", "c1-kube-scheduler", "c1-kwok", "c1-flagger", "etcd"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("processes (-want +got):\n%s", diff)
	}
	c, ok := loaded.Cluster("c1")
	if !ok {
		t.Fatal("no cluster c1")
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v"+KubeVersion {
		t.Errorf("server version %s, want v%s (the build must stamp it)", v.GitVersion, KubeVersion)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, FakeNode, metav1.GetOptions{}); err != nil {
		t.Errorf("fake node: %v", err)
	}

	procs := loaded.Processes()
	if err := loaded.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.running() {
			t.Errorf("%s (pid %d) still runs after Down", p.Name, p.PID)
		}
	}
	if _, err := os.Stat(dir + "/" + stateFile); !os.IsNotExist(err) {
		t.Errorf("state file left after Down: %v", err)
	}
}
