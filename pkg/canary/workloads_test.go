package canary_test

import (
	"testing"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Another workload of a release gets the application's delivery policy
// under its own name, target and Service; what belongs to the
// application's workload alone (its HPA, its ingress, its service name,
// the list of the release) stays with it. Catches: two canaries fighting
// over one Service or HPA, and the list copied onto every canary.
func TestForWorkload(t *testing.T) {
	a := app()
	a.Service.Name = "shop"
	a.Delivery.Autoscale = &config.Autoscale{MinReplicas: 1, MaxReplicas: 2}
	a.Delivery.TrafficRouting.IngressRef = &config.IngressRef{Name: "shop"}
	own := canary.Render(a, canary.Input{Cluster: "c1", Rollout: "r1", Event: canary.EventHook{URL: "http://flotilla/hooks/flagger"}}).Canary
	own.Annotations[canary.AnnotationWorkloads] = "shop-api,shop-worker"
	got := canary.ForWorkload(own, "DaemonSet", "shop-worker")

	want := own.DeepCopy()
	want.Name = "shop-worker"
	delete(want.Annotations, canary.AnnotationWorkloads)
	want.Spec.TargetRef = flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "shop-worker"}
	want.Spec.Service.Name, want.Spec.AutoscalerRef, want.Spec.IngressRef = "", nil, nil
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ForWorkload (-want +got):\n%s", d)
	}
	if own.Annotations[canary.AnnotationWorkloads] == "" || own.Spec.AutoscalerRef == nil || own.Spec.Service.Name != "shop" {
		t.Errorf("ForWorkload changed the application's canary: %+v", own)
	}
	if d := cmp.Diff([]string{"shop-worker"}, canary.ReleaseWorkloads(own)); d != "" {
		t.Errorf("ReleaseWorkloads (-want +got):\n%s", d)
	}
	if got := canary.ReleaseWorkloads(got); got != nil {
		t.Errorf("ReleaseWorkloads(the worker's) = %q, want none", got)
	}
}
