package bootstrap

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func actions(rs []Result) []Action {
	var out []Action
	for _, r := range rs {
		out = append(out, r.Action)
	}
	return out
}

func states(fs []Finding) []State {
	var out []State
	for _, f := range fs {
		out = append(out, f.State)
	}
	return out
}

// Apply and Check against a real API server: what a dry run, a first and a
// second apply and a change report, and what Check finds at each step.
func TestApplyAndCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(cfg, FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	ns := randomName("bt-")
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "settings", "namespace": ns},
		"data":     map[string]any{"mode": "a"},
	}}
	target := Target{Name: "c1", Objects: []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		cm,
	}}
	step := func(name string, dryRun bool, want []Action) {
		t.Helper()
		rs, err := Apply(ctx, a, target, dryRun)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, actions(rs)); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
	}
	check := func(name string, want []State, detail string) {
		t.Helper()
		fs, err := Check(ctx, a, target)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, states(fs)); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
		if fs[1].Detail != detail {
			t.Errorf("%s: detail %q, want %q", name, fs[1].Detail, detail)
		}
	}
	check("check before", []State{Missing, Missing}, "")
	step("dry run before", true, []Action{WouldCreate, WouldCreate})
	if _, err := a.Get(ctx, cm); !apierrors.IsNotFound(err) {
		t.Fatalf("a dry run created the ConfigMap: %v", err)
	}
	step("first", false, []Action{Created, Created})
	step("second", false, []Action{Unchanged, Unchanged})
	check("check after", []State{OK, OK}, "")
	cm.Object["data"] = map[string]any{"mode": "b"}
	step("dry run of a change", true, []Action{Unchanged, WouldConfigure})
	check("check of a change", []State{OK, Outdated}, ".data.mode")
	step("change", false, []Action{Unchanged, Configured})
	check("check after the change", []State{OK, OK}, "")
}

// The identity bootstrap makes: its kubeconfig reads what flotilla
// renders, writes it in application namespaces only, and reads no Secret.
func TestIdentityKubeconfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(admin, FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Namespace: randomName("id-")}.withDefaults()
	app := randomName("app-")
	objs, err := identity(o, []string{app})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, a, Target{Name: "c1", Objects: objs}, false); err != nil {
		t.Fatal(err)
	}
	b, err := Kubeconfig(ctx, admin, o.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing Deployments everywhere: %v", err)
	}
	if _, err := cs.CoreV1().Pods(app).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("listing pods in the application namespace: %v", err)
	}
	for what, err := range map[string]error{
		"listing Secrets in its namespace":                     func() error { _, err := cs.CoreV1().Secrets(o.Namespace).List(ctx, metav1.ListOptions{}); return err }(),
		"listing pods elsewhere":                               func() error { _, err := cs.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{}); return err }(),
		"deleting its namespace":                               cs.CoreV1().Namespaces().Delete(ctx, o.Namespace, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}),
		"deleting a Deployment outside application namespaces": cs.AppsV1().Deployments("kube-system").Delete(ctx, "x", metav1.DeleteOptions{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
}
