package cluster_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Observe reads what an application runs from a real API server, live and
// then from the watch cache; the cache tells OnPrimaryChange of a primary
// changed by hand, and of a canary gone.
func TestObserve(t *testing.T) {
	ctx, e := onCluster(t, "observe")
	c, cl, ns, set := e.c, e.cl, e.ns, e.set
	create(ctx, t, cl, deployment(ns, "web", "web:2"), deployment(ns, "web-primary", "web:1"), suspendedCanary(ns, "web", config.KindDeployment),
		deployment(ns, "bare", "bare:1")) // no canary, no primary: flotilla never delivered it

	changed := make(chan string, 16)
	set.OnPrimaryChange(func(cluster, namespace, workload string) {
		if namespace == ns {
			changed <- cluster + "/" + workload
		}
	})
	web := config.Workload{Name: "web", Container: "app"}
	tests := []struct {
		name string
		w    config.Workload
		want rollout.Observed
	}{
		{"delivered", web, rollout.Observed{Cluster: c.Name, Workload: true, Canary: true, Primary: "web:1", PrimaryImage: "web:1", Generation: 1}},
		{"never delivered", config.Workload{Name: "bare", Container: "app"}, rollout.Observed{Cluster: c.Name, Workload: true}},
		{"no workload", config.Workload{Name: "ghost", Container: "app"}, rollout.Observed{Cluster: c.Name}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := set.Observe(ctx, c.Name, ns, tt.w) // live: the cache starts now
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Observe live (-want +got):\n%s", diff)
			}
			waitCached(ctx, t, set, c.Name, ns, web)
			if got, err = set.Observe(ctx, c.Name, ns, tt.w); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Observe cached (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("a primary changed by hand is told", func(t *testing.T) {
		// The deployment controller writes the status as well: retry on its conflicts.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web-primary", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[1].Image = "web:0"
			_, err = cl.Kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-changed:
			if got != c.Name+"/web" {
				t.Errorf("told of %s, want %s/web", got, c.Name)
			}
		case <-ctx.Done():
			t.Fatal("not told of the primary's change")
		}
		for {
			o, err := set.Observe(ctx, c.Name, ns, web)
			if err == nil && o.Primary == "web:0" && o.Generation == 2 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the cache never saw the primary's new image: %+v, %v", o, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Run("a canary gone is told", func(t *testing.T) {
		if err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-changed:
			if got != c.Name+"/web" {
				t.Errorf("told of %s, want %s/web", got, c.Name)
			}
		case <-ctx.Done():
			t.Fatal("not told of the canary's deletion")
		}
	})
}
