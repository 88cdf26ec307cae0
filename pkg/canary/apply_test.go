package canary_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is one cluster (a real kube-apiserver with Flagger's CRDs and a
// Flagger controller), started by TestMain unless the tests run -short or
// only rewrite goldens; FLOTILLA_FLEET_DIR reuses a running fleet instead.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || *update {
		os.Exit(m.Run())
	}
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// TestApply applies every object of every golden file, server-side, to a
// real API server that serves Flagger's CRDs, in a namespace of its own, and
// reads each back: the server must accept it (schema validation) and keep
// every field flotilla set (a field unknown to a CRD's schema would be
// pruned silently).
func TestApply(t *testing.T) {
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	cl, err := fleettest.NewClients(fleet.Clusters[0])
	if err != nil {
		t.Fatal(err)
	}
	applier, err := kube.NewApplier(cl.Config, "flotilla-test")
	if err != nil {
		t.Fatal(err)
	}
	goldens, err := filepath.Glob(filepath.Join("testdata", "golden", "*.yaml"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, path := range goldens {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := kube.Decode(data)
			if err != nil {
				t.Fatalf("decoding %s: %v", path, err)
			}
			ns := cl.Namespace(ctx, t, "golden")
			t.Cleanup(func() { releaseCanaries(t, cl, ns) })
			for _, o := range objs {
				o.SetNamespace(ns)
			}
			if err := applier.Apply(ctx, objs...); err != nil {
				t.Fatalf("the API server refused %s: %v", path, err)
			}
			for _, want := range objs {
				gvr, _ := meta.UnsafeGuessKindToResource(want.GroupVersionKind())
				got, err := cl.Dynamic.Resource(gvr).Namespace(ns).Get(ctx, want.GetName(), metav1.GetOptions{})
				if err != nil {
					t.Fatalf("reading back %s %s: %v", want.GetKind(), want.GetName(), err)
				}
				for _, d := range missing("", want.Object, got.Object) {
					t.Errorf("%s %s: %s", want.GetKind(), want.GetName(), d)
				}
			}
			// Removing the policy removes what Selector finds: all of it.
			app := objs[0].GetLabels()[canary.LabelApplication]
			var found []string
			for _, gvr := range canary.OwnedResources {
				list, err := cl.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: canary.Selector(app).String()})
				if err != nil {
					t.Fatalf("listing %s: %v", gvr.Resource, err)
				}
				for _, o := range list.Items {
					found = append(found, o.GetKind()+"/"+o.GetName())
				}
			}
			var applied []string
			for _, o := range objs {
				applied = append(applied, o.GetKind()+"/"+o.GetName())
			}
			slices.Sort(found)
			slices.Sort(applied)
			if !slices.Equal(found, applied) {
				t.Errorf("Selector(%q) finds %v, want what was applied: %v", app, found, applied)
			}
		})
	}
}

// releaseCanaries removes the finalizer Flagger puts on canaries that
// revert on deletion: their target never existed, so Flagger could not
// finalize them, and the namespace would never go away.
func releaseCanaries(t *testing.T, cl *fleettest.Clients, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		if len(c.Finalizers) > 0 {
			_, _ = cl.Flagger.FlaggerV1beta1().Canaries(ns).Patch(ctx, c.Name, types.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}
}

// missing lists what of want got lacks or holds differently, by path: got
// may hold more (server defaults), never less.
func missing(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T, want a mapping", path, got)}
		}
		var out []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: dropped by the server", path, k))
				continue
			}
			out = append(out, missing(path+"."+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(number(want), number(got)) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		return nil
	}
}

// number makes integers and floats comparable: decoders pick either.
func number(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	}
	return v
}
