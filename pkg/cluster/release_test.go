package cluster_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A release of two workloads reads as one canary, live and from the watch
// cache: the primary runs the commit only once both primaries do. Catches:
// a reader that reads the application's canary alone (the worker's primary
// still on the old commit unseen), and a cache that answers differently.
func TestCanaryStatusOfARelease(t *testing.T) {
	ctx, e := onCluster(t, "release")
	c, cl, ns, set := e.c, e.cl, e.ns, e.set
	const oldRev, newRev = "git.test/deploy@1111", "git.test/deploy@2222"
	web, webPrimary := deployment(ns, "web", "web:1"), deployment(ns, "web-primary", "web:1")
	worker, workerPrimary := deployment(ns, "worker", "worker:1"), deployment(ns, "worker-primary", "worker:1")
	for d, rev := range map[*metav1.ObjectMeta]string{&web.Spec.Template.ObjectMeta: newRev, &webPrimary.Spec.Template.ObjectMeta: newRev,
		&worker.Spec.Template.ObjectMeta: newRev, &workerPrimary.Spec.Template.ObjectMeta: oldRev} {
		d.Annotations = map[string]string{canary.AnnotationRevision: rev}
	}
	own := suspendedCanary(ns, "web", config.KindDeployment)
	own.Annotations = map[string]string{canary.AnnotationWorkloads: "web,worker"}
	create(ctx, t, cl, web, webPrimary, worker, workerPrimary, own, suspendedCanary(ns, "worker", config.KindDeployment))

	w := config.Workload{Kind: config.KindDeployment, Name: "web"}
	images := func(st cluster.CanaryStatus) []string {
		out := []string{st.PrimaryImage, st.TargetImage}
		for _, ws := range st.Workloads {
			out = append(out, ws.Name, ws.PrimaryImage, ws.TargetImage)
		}
		return out
	}
	want := []string{"mixed: web=" + newRev + ", worker=" + oldRev, newRev, "web", newRev, newRev, "worker", oldRev, newRev}
	st, err := set.CanaryStatus(ctx, c.Name, ns, w)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, images(st)); d != "" {
		t.Errorf("live status (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, images(waitCached(ctx, t, set, c.Name, ns, w))); d != "" {
		t.Errorf("cached status (-want +got):\n%s", d)
	}

	// Flagger promotes the worker: the release's primary runs the commit.
	// (A conflict with the deployment controller's status write is read again.)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "worker-primary", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Annotations[canary.AnnotationRevision] = newRev
		_, err = cl.Kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = set.CanaryStatus(ctx, c.Name, ns, w); err != nil || st.PrimaryImage != newRev || len(st.Workloads) != 2 {
		t.Errorf("live status after the worker's promotion = %+v, %v; want the primary at %s", st, err, newRev)
	}
	for {
		if st, ok := set.CachedCanaryStatus(c.Name, ns, w); ok && st.PrimaryImage == newRev {
			if d := cmp.Diff([]string{"web", "worker"}, names(st.Workloads), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("cached workloads (-want +got):\n%s", d)
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the cache never saw the worker's promotion")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func names(ws []rollout.WorkloadStatus) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}
