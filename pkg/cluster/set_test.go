package cluster_test

import (
	"context"
	"flag"
	"os"
	"testing"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is one cluster (a real kube-apiserver with Flagger's CRDs), started
// by TestMain unless the tests run -short; FLOTILLA_FLEET_DIR reuses a
// running fleet instead.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

// clusterEnv is a test's part of the fleet's cluster: its clients, a
// namespace of the test's own and a Set on the cluster.
type clusterEnv struct {
	c   localfleet.Cluster
	cl  *fleettest.Clients
	ns  string
	set *cluster.Set
}

// onCluster skips the test without a fleet; else it gives the test's
// context (a minute) and its part of the cluster, the namespace named
// after prefix. The context ends, the Set closes and the namespace goes
// with the test.
func onCluster(t *testing.T, prefix string) (context.Context, clusterEnv) {
	t.Helper()
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	c := fleet.Clusters[0]
	cl, err := fleettest.NewClients(c)
	if err != nil {
		t.Fatal(err)
	}
	ns := cl.Namespace(ctx, t, prefix)
	set, err := cluster.NewSet([]config.Cluster{{Name: c.Name, Kubeconfig: c.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(set.Close)
	return ctx, clusterEnv{c: c, cl: cl, ns: ns, set: set}
}

// TestCanaryStatusWorkloadKinds reads the images of a canary's workloads of
// each kind from a real API server. The namespace holds a DaemonSet and a
// Deployment of the same names, so reading the wrong kind shows.
func TestCanaryStatusWorkloadKinds(t *testing.T) {
	ctx, e := onCluster(t, "status")
	c, cl, ns, set := e.c, e.cl, e.ns, e.set

	// agent is a DaemonSet canary, web a Deployment one; each name is taken
	// by a look-alike of the other kind too.
	create(ctx, t, cl, daemonSet(ns, "agent", "agent:2"), daemonSet(ns, "agent-primary", "agent:1"),
		deployment(ns, "agent", "wrong:deployment"), deployment(ns, "agent-primary", "wrong:deployment"),
		deployment(ns, "web", "web:2"), deployment(ns, "web-primary", "web:1"),
		daemonSet(ns, "web", "wrong:daemonset"), daemonSet(ns, "web-primary", "wrong:daemonset"),
		suspendedCanary(ns, "agent", config.KindDaemonSet), suspendedCanary(ns, "web", config.KindDeployment),
		// Flagger has not made the primary of this one yet.
		daemonSet(ns, "fresh", "fresh:1"), suspendedCanary(ns, "fresh", config.KindDaemonSet))

	tests := []struct {
		name                  string
		workload              config.Workload
		wantPrimary, wantTarg string
	}{
		{"DaemonSet", config.Workload{Kind: config.KindDaemonSet, Name: "agent", Container: "app"}, "agent:1", "agent:2"},
		{"DaemonSet, first container", config.Workload{Kind: config.KindDaemonSet, Name: "agent"}, "sidecar:1", "sidecar:1"},
		{"DaemonSet without a primary yet", config.Workload{Kind: config.KindDaemonSet, Name: "fresh", Container: "app"}, "", "fresh:1"},
		{"Deployment", config.Workload{Kind: config.KindDeployment, Name: "web", Container: "app"}, "web:1", "web:2"},
		{"kind defaults to Deployment", config.Workload{Name: "web", Container: "app"}, "web:1", "web:2"},
		// The canary's targetRef is what Flagger runs: it wins over the kind
		// asked for.
		{"kind of the canary's target", config.Workload{Kind: config.KindDeployment, Name: "agent", Container: "app"}, "agent:1", "agent:2"},
		{"no such container", config.Workload{Kind: config.KindDaemonSet, Name: "agent", Container: "nope"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := set.CanaryStatus(ctx, c.Name, ns, tt.workload)
			if err != nil {
				t.Fatalf("CanaryStatus: %v", err)
			}
			if st.PrimaryImage != tt.wantPrimary || st.TargetImage != tt.wantTarg {
				t.Errorf("primary %q, target %q; want %q, %q", st.PrimaryImage, st.TargetImage, tt.wantPrimary, tt.wantTarg)
			}
			// The watch cache reads the same images. (Not the same status:
			// the fleet's Flagger may initialize the canary between the
			// two reads, as it did once in CI.)
			cached := waitCached(ctx, t, set, c.Name, ns, tt.workload)
			if cached.PrimaryImage != st.PrimaryImage || cached.TargetImage != st.TargetImage {
				t.Errorf("cached status %+v, live %+v", cached, st)
			}
		})
	}

	t.Run("the cache follows the cluster", func(t *testing.T) {
		w := config.Workload{Kind: config.KindDeployment, Name: "web", Container: "app"}
		waitCached(ctx, t, set, c.Name, ns, w)
		// The fleet's controllers write the deployment too (its status,
		// Flagger's annotations): a conflict is retried on a fresh read, as
		// it failed once in CI.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[1].Image = "web:3"
			_, err = cl.Kube.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if st, ok := set.CachedCanaryStatus(c.Name, ns, w); ok && st.TargetImage == "web:3" {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal("the cache never saw the new image")
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	t.Run("a closed set reads nothing from a cache", func(t *testing.T) {
		set.Close()
		if _, ok := set.CachedCanaryStatus(c.Name, ns, config.Workload{Name: "web", Container: "app"}); ok {
			t.Error("CachedCanaryStatus answered after Close")
		}
	})

	t.Run("unsupported kind", func(t *testing.T) {
		// Flagger can target a Service; flotilla cannot follow one.
		create(ctx, t, cl, suspendedCanary(ns, "db", "Service"))
		_, err := set.CanaryStatus(ctx, c.Name, ns, config.Workload{Kind: "Service", Name: "db"})
		if !fault.IsPermanent(err) {
			t.Errorf("CanaryStatus = %v, want a permanent error", err)
		}
	})
	t.Run("no canary", func(t *testing.T) {
		_, err := set.CanaryStatus(ctx, c.Name, ns, config.Workload{Kind: config.KindDaemonSet, Name: "ghost"})
		if err == nil {
			t.Error("CanaryStatus of a canary that does not exist succeeded")
		}
	})
}

// waitCached waits for the cache of the namespace to sync and returns the
// cached status.
func waitCached(ctx context.Context, t *testing.T, set *cluster.Set, clusterName, ns string, w config.Workload) cluster.CanaryStatus {
	t.Helper()
	for {
		if st, ok := set.CachedCanaryStatus(clusterName, ns, w); ok {
			return st
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cache of %s/%s never synced", clusterName, ns)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func create(ctx context.Context, t *testing.T, cl *fleettest.Clients, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *appsv1.DaemonSet:
			_, err = cl.Kube.AppsV1().DaemonSets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = cl.Kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *flaggerv1.Canary:
			_, err = cl.Flagger.FlaggerV1beta1().Canaries(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("cannot create %T", o)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}
}

// pod runs a sidecar first and the application's container, app, second.
func pod(name, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "sidecar", Image: "sidecar:1"},
			{Name: "app", Image: image},
		}},
	}
}

func daemonSet(ns, name, image string) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: pod(name, image),
		},
	}
}

func deployment(ns, name, image string) *appsv1.Deployment {
	replicas := int32(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: pod(name, image),
		},
	}
}

// suspendedCanary targets the workload name of kind; suspended, so that
// Flagger leaves it and the workloads as the test made them.
func suspendedCanary(ns, name, kind string) *flaggerv1.Canary {
	return &flaggerv1.Canary{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: flaggerv1.CanarySpec{
			Provider:  "kubernetes",
			TargetRef: flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: kind, Name: name},
			Service:   flaggerv1.CanaryService{Port: 80},
			Suspend:   true,
			Analysis:  &flaggerv1.CanaryAnalysis{Interval: "1m", Threshold: 1, Iterations: 1},
		},
	}
}
