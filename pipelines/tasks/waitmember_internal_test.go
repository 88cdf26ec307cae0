package tasks

import (
	"errors"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerfake "github.com/fluxcd/flagger/pkg/client/clientset/versioned/fake"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// A member whose canary is deleted while the set's run waits for it (the
// run applied it first) fails the run at once, naming the member, rather
// than waiting for it until the run's deadline: the application's later
// runs in that cluster (a catch-up bringing the canary back) wait behind
// this one (release-sets.md, session 41).
func TestWaitMemberCanaryDeleted(t *testing.T) {
	const ns, rev = "shop", "127.0.0.1:5000/demo/shop-frontend@sha256:2"
	deployment := func(name, revision string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{canary.AnnotationRevision: revision}},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{canary.AnnotationRevision: revision}},
			}},
		}
	}
	cnry := func(phase flaggerv1.CanaryPhase) *flaggerv1.Canary {
		c := &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: "shop-frontend", Namespace: ns}}
		c.Spec.TargetRef.Kind = "Deployment"
		c.Status.Phase = phase
		return c
	}
	type outcome struct {
		Waiting   string
		Err       bool
		Permanent bool
		Failed    bool // errMemberFailed: the member named as failing
	}
	for _, tt := range []struct {
		name     string
		kube     []runtime.Object
		canaries []runtime.Object
		want     outcome
	}{
		{
			name:     "promoting: waits",
			kube:     []runtime.Object{deployment("shop-frontend", rev), deployment("shop-frontend-primary", "before")},
			canaries: []runtime.Object{cnry(flaggerv1.CanaryPhaseFinalising)},
			want:     outcome{Waiting: "canary shop-frontend Finalising"},
		},
		{
			name:     "promoted: ready",
			kube:     []runtime.Object{deployment("shop-frontend", rev), deployment("shop-frontend-primary", rev)},
			canaries: []runtime.Object{cnry(flaggerv1.CanaryPhaseSucceeded)},
			want:     outcome{},
		},
		{
			name: "deleted with its primary: the member fails",
			kube: []runtime.Object{deployment("shop-frontend", rev)},
			want: outcome{Err: true, Permanent: true, Failed: true},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kube, fl := kubefake.NewClientset(tt.kube...), flaggerfake.NewSimpleClientset(tt.canaries...)
			r := memberRun{m: SetMember{Application: "shop-frontend"}, canaries: []string{"shop-frontend"}}
			waiting, err := memberReady(t.Context(), kube, fl, ns, rev, r, time.Now())
			got := outcome{Waiting: waiting, Err: err != nil, Permanent: fault.IsPermanent(err), Failed: errors.Is(err, errMemberFailed)}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("memberReady (-want +got):\n%s\nerr: %v", d, err)
			}
		})
	}
}
