package bootstrap

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// annotating is the package's cluster where, between bootstrap's read and
// its apply, another field manager (a controller) writes its own mark on
// the object, as the Deployment controller writes its revision annotation
// on a Deployment just created.
type annotating struct {
	Applier
	other Applier
	mark  map[string]string
}

func (a annotating) Get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	cur, err := a.Applier.Get(ctx, o)
	if err != nil || a.mark == nil {
		return cur, err
	}
	m := &unstructured.Unstructured{}
	m.SetAPIVersion(o.GetAPIVersion())
	m.SetKind(o.GetKind())
	m.SetNamespace(o.GetNamespace())
	m.SetName(o.GetName())
	m.SetAnnotations(a.mark)
	if _, err := a.other.ApplyObject(ctx, m, false); err != nil {
		return nil, fmt.Errorf("the controller's mark: %w", err)
	}
	return cur, nil
}

// TestApplyTellsWhatBootstrapChanged: apply reports what it changed of
// what bootstrap applies, on a real API server: a controller's mark
// landing between the read and the apply is no change of bootstrap's; an
// annotation bootstrap sets, changed, is.
func TestApplyTellsWhatBootstrapChanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cm := func(note string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "apply-test", "namespace": "default", "annotations": map[string]any{"flotilla.dev/note": note}},
			"data":     map[string]any{"k": "v"},
		}}
		return o
	}
	own := clusterAs(t, FieldManager)
	t.Cleanup(func() { _ = own.Delete(context.WithoutCancel(ctx), cm("")) })
	controller := annotating{Applier: own, other: clusterAs(t, "kube-controller-manager"), mark: map[string]string{"deployment.kubernetes.io/revision": "1"}}
	for _, tc := range []struct {
		name string
		a    Applier
		o    *unstructured.Unstructured
		want Action
	}{
		{"missing", own, cm("a"), Created},
		{"the same again", own, cm("a"), Unchanged},
		{"the same, a controller's mark landing meanwhile", controller, cm("a"), Unchanged},
		{"bootstrap's annotation changed", own, cm("b"), Configured},
		{"a dry run of a change", own, cm("c"), WouldConfigure},
	} {
		got, err := apply(ctx, tc.a, tc.o, tc.want == WouldConfigure, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
