package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-cd/flotilla/pkg/bootstrap"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// fakeFleetCluster holds objects in memory: Get finds them, a dry run
// returns the object applied, List lists them (or fails with listErr).
type fakeFleetCluster struct {
	objs    []*unstructured.Unstructured
	listErr error
}

func (c *fakeFleetCluster) Get(_ context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	for _, x := range c.objs {
		if bootstrap.RefOf(x) == bootstrap.RefOf(o) {
			return x.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: o.GetKind()}, o.GetName())
}

func (c *fakeFleetCluster) ApplyObject(_ context.Context, o *unstructured.Unstructured, _ bool) (*unstructured.Unstructured, error) {
	return o.DeepCopy(), nil
}

func (c *fakeFleetCluster) List(_ context.Context, _, kind string) ([]unstructured.Unstructured, error) {
	if c.listErr != nil {
		return nil, c.listErr
	}
	var out []unstructured.Unstructured
	for _, x := range c.objs {
		if x.GetKind() == kind {
			out = append(out, *x.DeepCopy())
		}
	}
	return out, nil
}

// helmFlagger is a Flagger Deployment Helm installed (release flagger in
// namespace flagger), at version.
func helmFlagger(version string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "flagger", "namespace": "flagger",
			"labels":      map[string]any{"app.kubernetes.io/managed-by": "Helm"},
			"annotations": map[string]any{"meta.helm.sh/release-name": "flagger", "meta.helm.sh/release-namespace": "flagger"},
		},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
			map[string]any{"name": "flagger", "image": "ghcr.io/fluxcd/flagger:" + version},
		}}}},
	}}
}

// target is bootstrap's plan for one cluster c1, and Flagger's CRDs in it.
func target(t *testing.T) (bootstrap.Target, []*unstructured.Unstructured) {
	t.Helper()
	ts, err := bootstrap.Plan(&config.Config{Fleet: config.Fleet{Clusters: []config.Cluster{{Name: "c1"}}}}, nil, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var crds []*unstructured.Unstructured
	for _, o := range ts[0].Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		}
	}
	return ts[0], crds
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
func TestLeaveForeign(t *testing.T) {
	tgt, crds := target(t)
	ctx := context.Background()
	withHelm := &fakeFleetCluster{objs: append([]*unstructured.Unstructured{helmFlagger("1.42.0")}, crds...)}

	lines, got, err := (&bootstrapFlags{}).leaveForeign(ctx, tgt, withHelm)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"c1\tFlagger 1.42.0 installed by Helm (release flagger in flagger, Deployment flagger/flagger) found: left alone (--manage-flagger to apply flotilla's " + bootstrap.FlaggerVersion + " over it)"}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff(refsOf(tgt.WithoutFlagger()), refsOf(got)); diff != "" {
		t.Errorf("objects applied (-want +got)\n%s", diff)
	}

	// --manage-flagger does not even look.
	lines, got, err = (&bootstrapFlags{manageFlagger: true}).leaveForeign(ctx, tgt, &fakeFleetCluster{listErr: errors.New("not asked")})
	if err != nil || lines != nil {
		t.Errorf("--manage-flagger: %q, %v", lines, err)
	}
	if diff := cmp.Diff(refsOf(tgt), refsOf(got)); diff != "" {
		t.Errorf("--manage-flagger: objects applied (-want +got)\n%s", diff)
	}

	// Nobody else's Flagger: bootstrap's own applies.
	lines, got, err = (&bootstrapFlags{}).leaveForeign(ctx, tgt, &fakeFleetCluster{})
	if err != nil || lines != nil || len(got.Objects) != len(tgt.Objects) {
		t.Errorf("no other Flagger: %q, %d objects, %v", lines, len(got.Objects), err)
	}

	noCRDs := &fakeFleetCluster{objs: []*unstructured.Unstructured{helmFlagger("1.42.0")}}
	_, _, err = (&bootstrapFlags{}).leaveForeign(ctx, tgt, noCRDs)
	if err == nil || !strings.Contains(err.Error(), "canaries.flagger.app") || !strings.Contains(err.Error(), "--manage-flagger") {
		t.Errorf("missing CRDs: %v, want them named and --manage-flagger", err)
	}
}

// check does not call a newer Flagger Helm installed outdated; with
// --manage-flagger it compares with bootstrap's Flagger, which is missing.
func TestCheckForeignFlagger(t *testing.T) {
	tgt, crds := target(t)
	ctx := context.Background()
	c := &fakeFleetCluster{objs: append([]*unstructured.Unstructured{helmFlagger("1.42.0")}, crds...)}
	fs, err := (&bootstrapFlags{}).check(ctx, tgt, c)
	if err != nil {
		t.Fatal(err)
	}
	flagger := bootstrap.Ref{Kind: "Deployment", Namespace: "flagger", Name: "flagger"}
	if fs[0].Object != flagger || fs[0].State != bootstrap.NotReady || !strings.Contains(fs[0].Detail, "newer than the tested") {
		t.Errorf("Helm's Flagger: %+v", fs[0])
	}
	for _, f := range fs {
		if f.State == bootstrap.Outdated {
			t.Errorf("outdated: %+v", f)
		}
	}

	fs, err = (&bootstrapFlags{manageFlagger: true}).check(ctx, tgt, c)
	if err != nil {
		t.Fatal(err)
	}
	own := bootstrap.Ref{Kind: "Deployment", Namespace: bootstrap.DefaultFlaggerNamespace, Name: "flagger"}
	found := false
	for _, f := range fs {
		found = found || f.Object == own && f.State == bootstrap.Missing
	}
	if !found {
		t.Errorf("--manage-flagger: bootstrap's Flagger not reported missing: %+v", fs)
	}
}
