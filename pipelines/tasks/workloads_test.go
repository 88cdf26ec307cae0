package tasks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

func deploymentNamed(name, namespace string) string {
	ns := ""
	if namespace != "" {
		ns = "\n  namespace: " + namespace
	}
	return strings.NewReplacer("metadata:\n  name: web\n", "metadata:\n  name: "+name+ns+"\n", "app: web}", "app: "+name+"}").Replace(webDeployment)
}

// Every Deployment a commit renders gets a canary of its own with the
// application's delivery policy, its pod template marked with the
// revision; the application's canary lists them; a commit that renders
// one workload again lists none (and the dropped workload's canary is
// pruned with it once pending runs). Catches: one canary per release (the
// worker applied with no canary, as before #33), a worker's canary that
// shares the application's Service or autoscaler, a list kept after the
// worker is gone, and a workload in another namespace canaried nowhere.
func TestApplyManifestsCanariesEveryWorkload(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "workloads")
	url := gittest.NewRepo(t, map[string]string{
		"web/deployment.yaml": webDeployment,
		"web/config.yaml":     webConfig("hello"),
		"web/worker.yaml":     deploymentNamed("web-worker", ""),
	})
	first := gittest.Head(t, url).Hash.String()
	second := gittest.Commit(t, url, "main", "drop the worker", map[string]string{"web/worker.yaml": ""})
	third := gittest.Commit(t, url, "main", "a worker elsewhere", map[string]string{"web/worker.yaml": deploymentNamed("web-worker", "elsewhere")})
	app := policy(ns)
	app.Delivery.TrafficAnalysis.Metrics = nil
	app.Delivery.Suspend = true
	app.Service.Name = "web-svc"
	mirror := gitops.NewMirror(t.TempDir())
	apply := func(rollout, commit, prune string) error {
		t.Helper()
		_, err := tasks.ApplyManifests(ctx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Workload: "web", Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: rollout}).Canary,
			URL: url, Commit: commit, Paths: []string{"web"}, Application: "web", Prune: prune,
		})
		return err
	}
	if err := apply("r1", first, tasks.PruneAfter); err != nil {
		t.Fatal(err)
	}
	web, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := web.Annotations[canary.AnnotationWorkloads], "web,web-worker"; got != want {
		t.Errorf("the application's canary lists %q, want %q", got, want)
	}
	worker, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-worker", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the worker's canary: %v", err)
	}
	type spec struct {
		Target, Kind, Service, Rollout string
		Autoscaler                     bool
		Iterations                     int
		Webhooks                       int
	}
	got := spec{worker.Spec.TargetRef.Name, worker.Spec.TargetRef.Kind, worker.Spec.Service.Name, worker.Annotations[canary.AnnotationRollout],
		worker.Spec.AutoscalerRef != nil, worker.Spec.Analysis.Iterations, len(worker.Spec.Analysis.Webhooks)}
	want := spec{"web-worker", "Deployment", "", "r1", false, web.Spec.Analysis.Iterations, len(web.Spec.Analysis.Webhooks)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the worker's canary (-want +got):\n%s", d)
	}
	for _, name := range []string{"web", "web-worker"} {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Spec.Template.Annotations[canary.AnnotationRevision], tasks.Revision(url, first); got != want {
			t.Errorf("%s's revision = %q, want %q", name, got, want)
		}
	}

	if err := apply("r2", second, tasks.PruneAfter); err != nil {
		t.Fatal(err)
	}
	if web, err = cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, ok := web.Annotations[canary.AnnotationWorkloads]; ok {
		t.Errorf("a release of one workload still lists %q", got)
	}
	inv, err := tasks.ReadInventory(ctx, cl.Kube, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	var pending []string
	for _, e := range inv.Pending {
		pending = append(pending, e.ID)
	}
	wantPending := []string{ns + "_web-worker_apps_Deployment", ns + "_web-worker_flagger.app_Canary"}
	if d := cmp.Diff(wantPending, pending); d != "" {
		t.Errorf("pending after the worker was dropped (-want +got):\n%s", d)
	}
	if err := apply("r2", second, tasks.PrunePending); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-worker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the dropped worker's canary after the prune: %v, want it gone", err)
	}

	err = apply("r3", third, tasks.PruneAfter)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "Deployment elsewhere/web-worker, outside the application's namespace") {
		t.Errorf("ApplyManifests(a workload in another namespace) = %v, want a permanent error naming it", err)
	}
}
