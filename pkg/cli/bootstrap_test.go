package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-cd/flotilla/pkg/bootstrap"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// reach is the package's cluster as fleet bootstrap and check reach it:
// pkg/kube's Applier with bootstrap's field manager.
func reach(t *testing.T) *kube.Applier {
	t.Helper()
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	a, err := kube.NewApplier(cfg, bootstrap.FieldManager)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// randomName is prefix and 8 random hex digits.
func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// installHelmFlagger creates, as Helm would (field manager helm), Flagger's
// Deployment of pkg/bootstrap's testdata/helm-flagger.yaml (release flagger,
// 1.42.0) in a namespace of the test's own, deleted when the test ends, and
// waits until it is available (kwok makes its pod Ready). Flagger's CRDs are
// the fleet's.
func installHelmFlagger(ctx context.Context, t *testing.T) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "bootstrap", "testdata", "helm-flagger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kube.Decode(b)
	if err != nil || len(objs) != 1 {
		t.Fatalf("helm-flagger.yaml: %d objects, %v", len(objs), err)
	}
	d, ns := objs[0], randomName("helm-")
	d.SetNamespace(ns)
	d.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "flagger", "meta.helm.sh/release-namespace": ns})
	cfg, err := fleet.Clusters[0].RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment first: it is gone at once, its namespace only once
	// emptied, and the next test looks for Flaggers in every namespace.
	t.Cleanup(func() { //nolint:contextcheck // a cleanup: it runs once the test's context has ended
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.AppsV1().Deployments(ns).Delete(ctx, d.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting Helm's Flagger: %v", err)
		}
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting namespace %s: %v", ns, err)
		}
	})
	helm, err := kube.NewApplier(cfg, "helm")
	if err != nil {
		t.Fatal(err)
	}
	namespace := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	for _, o := range []*unstructured.Unstructured{namespace, d} {
		if _, err := helm.ApplyObject(ctx, o, false); err != nil {
			t.Fatal(err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := helm.Get(ctx, d)
		if err != nil {
			return false, err
		}
		f, _ := bootstrap.ForeignFlagger(cur)
		return f.Available, nil
	})
	if err != nil {
		t.Fatalf("waiting for Helm's Flagger to be available: %v", err)
	}
	return d
}

// target is bootstrap's plan for one cluster c1 whose application
// namespace, flotilla's namespace and Flagger's are the test's own.
func target(t *testing.T) bootstrap.Target {
	t.Helper()
	cfg := &config.Config{
		Fleet:        config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}},
		Applications: []config.Application{{Name: "shop", Namespace: randomName("app-")}},
	}
	ts, err := bootstrap.Plan(cfg, nil, bootstrap.Options{Namespace: randomName("id-"), FlaggerNamespace: randomName("fl-")})
	if err != nil {
		t.Fatal(err)
	}
	return ts[0]
}

// withCRDsMissing is t with Flagger's CRDs renamed into an API group no
// cluster serves: t as bootstrap sees a cluster that lacks them, without
// deleting the CRDs the fleet's Flagger serves.
func withCRDsMissing(t bootstrap.Target) bootstrap.Target {
	t.Objects, t.FlaggerObjects = slices.Clone(t.Objects), slices.Clone(t.FlaggerObjects)
	for i, o := range t.Objects {
		j := slices.Index(t.FlaggerObjects, bootstrap.RefOf(o))
		if o.GetKind() != "CustomResourceDefinition" || j < 0 {
			continue
		}
		crd := o.DeepCopy()
		crd.SetName(strings.Replace(crd.GetName(), ".flagger.app", ".missing.flagger.app", 1))
		t.Objects[i], t.FlaggerObjects[j] = crd, bootstrap.RefOf(crd)
	}
	return t
}

// listFails is the package's cluster refusing to list.
type listFails struct {
	fleetCluster
	err error
}

func (c listFails) List(context.Context, string, string) ([]unstructured.Unstructured, error) {
	return nil, c.err
}

func refsOf(t bootstrap.Target) []string {
	var out []string
	for _, o := range t.Objects {
		out = append(out, bootstrap.RefOf(o).String())
	}
	return out
}

// Both commands take --manage-flagger and say what it does.
func TestManageFlaggerFlag(t *testing.T) {
	for _, cmd := range []*cobra.Command{newFleetBootstrapCmd(), newFleetCheckCmd()} {
		if err := cmd.ParseFlags([]string{"--manage-flagger"}); err != nil {
			t.Fatalf("%s: %v", cmd.Name(), err)
		}
		if v, err := cmd.Flags().GetBool("manage-flagger"); err != nil || !v {
			t.Errorf("%s --manage-flagger: %t, %v", cmd.Name(), v, err)
		}
		if !strings.Contains(cmd.Long, "--manage-flagger") || !strings.Contains(cmd.Long, "did not install") {
			t.Errorf("%s's help does not tell about a Flagger bootstrap did not install and --manage-flagger", cmd.Name())
		}
	}
}

// bootstrap leaves a Flagger Helm installed alone, saying so, unless
// --manage-flagger; it fails naming Flagger's CRDs when they are missing.
// The package's cluster runs no other Flagger Deployment.
func TestLeaveForeign(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tgt, a := target(t), reach(t)

	// Nobody else's Flagger: bootstrap's own applies.
	lines, got, err := (&bootstrapFlags{}).leaveForeign(ctx, tgt, a)
	if err != nil || lines != nil {
		t.Errorf("no other Flagger: %q, %v", lines, err)
	}
	if diff := cmp.Diff(refsOf(tgt), refsOf(got)); diff != "" {
		t.Errorf("no other Flagger: objects applied (-want +got)\n%s", diff)
	}

	helm := installHelmFlagger(ctx, t)
	lines, got, err = (&bootstrapFlags{}).leaveForeign(ctx, tgt, a)
	if err != nil {
		t.Fatal(err)
	}
	ns := helm.GetNamespace()
	want := []string{"c1\tFlagger 1.42.0 installed by Helm (release flagger in " + ns + ", Deployment " + ns + "/flagger) found: left alone (--manage-flagger to apply flotilla's " + bootstrap.FlaggerVersion + " over it)"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(refsOf(tgt.WithoutFlagger()), refsOf(got)); diff != "" {
		t.Errorf("objects applied (-want +got)\n%s", diff)
	}

	// --manage-flagger does not even look, and takes over Flagger's
	// Deployment.
	lines, got, err = (&bootstrapFlags{manageFlagger: true}).leaveForeign(ctx, tgt, listFails{a, errors.New("not asked")})
	if err != nil || lines != nil {
		t.Errorf("--manage-flagger: %q, %v", lines, err)
	}
	if diff := cmp.Diff(refsOf(tgt), refsOf(got)); diff != "" {
		t.Errorf("--manage-flagger: objects applied (-want +got)\n%s", diff)
	}
	own := tgt.Objects[slices.IndexFunc(tgt.Objects, func(o *unstructured.Unstructured) bool { return o.GetKind() == "Deployment" })]
	if diff := cmp.Diff([]bootstrap.Ref{bootstrap.RefOf(own)}, got.Replace); diff != "" {
		t.Errorf("--manage-flagger: objects it may replace (-want +got)\n%s", diff)
	}

	missing := withCRDsMissing(tgt)
	_, _, err = (&bootstrapFlags{}).leaveForeign(ctx, missing, a)
	if err == nil || !strings.Contains(err.Error(), "canaries.missing.flagger.app") || !strings.Contains(err.Error(), "--manage-flagger") {
		t.Errorf("missing CRDs: %v, want them named and --manage-flagger", err)
	}
}

// check judges a newer Flagger Helm installed by its version, ok, and the
// fleet's Flagger CRDs (not bootstrap's rendering) by their presence; with
// --manage-flagger it compares with bootstrap's Flagger, which is missing.
func TestCheckForeignFlagger(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tgt, a := target(t), reach(t)
	helm := bootstrap.RefOf(installHelmFlagger(ctx, t))
	var own bootstrap.Ref
	crds := []bootstrap.Finding{}
	for _, o := range tgt.Objects {
		switch o.GetKind() {
		case "Deployment":
			own = bootstrap.RefOf(o)
		case "CustomResourceDefinition":
			crds = append(crds, bootstrap.Finding{Cluster: "c1", Object: bootstrap.RefOf(o), State: bootstrap.OK})
		}
	}
	for _, tc := range []struct {
		name  string
		flags bootstrapFlags
		// kinds are those of the findings compared.
		kinds []string
		want  []bootstrap.Finding
	}{
		{
			name:  "left alone",
			kinds: []string{"Deployment", "CustomResourceDefinition"},
			want: append([]bootstrap.Finding{{Cluster: "c1", Object: helm, State: bootstrap.OK,
				Detail: "Flagger 1.42.0 (installed by Helm), newer than the tested " + bootstrap.FlaggerVersion}}, crds...),
		},
		{
			name:  "--manage-flagger",
			flags: bootstrapFlags{manageFlagger: true},
			kinds: []string{"Deployment"},
			want:  []bootstrap.Finding{{Cluster: "c1", Object: own, State: bootstrap.Missing}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := tc.flags.check(ctx, tgt, a)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.DeleteFunc(fs, func(f bootstrap.Finding) bool { return !slices.Contains(tc.kinds, f.Object.Kind) })
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings of %v (-want +got)\n%s", tc.kinds, diff)
			}
		})
	}
}
