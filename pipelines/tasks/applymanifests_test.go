package tasks_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/render"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: registry.example.com/web:1
          envFrom:
            - configMapRef: {name: web-config}
`

func webConfig(greeting string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  greeting: " + greeting + "\n"
}

// apply-manifests renders a commit's manifests and applies them, marked
// with the revision, with the canary; the next commit reports the one
// before; a re-run of a rollout changes nothing and keeps its previous
// revision.
func TestApplyManifestsAppliesACommit(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "git")
	url := gittest.NewRepo(t, map[string]string{
		"clusters/c1/web/deployment.yaml": webDeployment,
		"clusters/c1/web/config.yaml":     webConfig("hello"),
		"README.md":                       "deployments\n",
	})
	first := gittest.Head(t, url).Hash.String()
	second := gittest.Commit(t, url, "main", "greet in Swedish", map[string]string{"clusters/c1/web/config.yaml": webConfig("hej")})
	app := policy(ns)
	app.Delivery.Autoscale, app.Delivery.TrafficAnalysis.Metrics = nil, nil
	// The fleet's Flagger leaves the canary alone: no primary, so each
	// previous revision is the workload's (a primary's, when Flagger made
	// one, would depend on when its control loop ran).
	app.Delivery.Suspend = true
	mirror := gitops.NewMirror(t.TempDir())
	apply := func(rollout, commit string) tasks.ApplyCanaryResult {
		t.Helper()
		res, err := tasks.ApplyManifests(ctx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Workload: "web", Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: rollout}).Canary,
			URL: url, Commit: commit, Paths: []string{"clusters/c1/web"},
		})
		if err != nil {
			t.Fatalf("ApplyManifests(%s, %s): %v", rollout, commit, err)
		}
		return res
	}
	check := func(commit, greeting string) {
		t.Helper()
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Spec.Template.Annotations[canary.AnnotationRevision], tasks.Revision(url, commit); got != want {
			t.Errorf("revision = %q, want %q", got, want)
		}
		cm, err := cl.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil || cm.Data["greeting"] != greeting {
			t.Errorf("config map = %v, %v; want greeting %q", cm.Data, err, greeting)
		}
		if _, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
			t.Errorf("canary: %v", err)
		}
	}
	if res := apply("r1", first); res.PreviousImage != "" || !res.Changed {
		t.Errorf("first deployment: %+v, want no previous revision and a change", res)
	}
	check(first, "hello")
	want := tasks.ApplyCanaryResult{PreviousImage: tasks.Revision(url, first), Changed: true}
	if res := apply("r2", second); !cmp.Equal(res, want) {
		t.Errorf("second commit: %+v, want %+v", res, want)
	}
	check(second, "hej")
	want.Changed = false
	if res := apply("r2", second); !cmp.Equal(res, want) {
		t.Errorf("the same rollout again: %+v, want %+v", res, want)
	}
	// A revert applies the first commit again.
	if res := apply("r2-revert", first); res.PreviousImage != tasks.Revision(url, second) || !res.Changed {
		t.Errorf("revert: %+v", res)
	}
	check(first, "hello")

	// A commit running an image the application does not allow changes
	// nothing.
	_, err := tasks.ApplyManifests(ctx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
		Rollout: "r4", Namespace: ns, Workload: "web", Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: "r4"}).Canary,
		URL: url, Commit: second, Paths: []string{"clusters/c1/web"}, AllowedImages: []string{`registry\.example\.com/api`},
	})
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "image registry.example.com/web:1 is not allowed") {
		t.Errorf("ApplyManifests(an image not allowed) = %v, want a permanent error naming it", err)
	}
	check(first, "hello")

	_, err = tasks.ApplyManifests(ctx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
		Rollout: "r3", Namespace: ns, Workload: "api", Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: "r3"}).Canary,
		URL: url, Commit: second, Paths: []string{"clusters/c1/web"},
	})
	if !fault.IsPermanent(err) || !errors.Is(err, render.ErrRender) || !strings.Contains(err.Error(), "renders no Deployment "+ns+"/api") {
		t.Errorf("ApplyManifests(a workload the commit lacks) = %v, want a permanent error naming it", err)
	}
}

func namedConfig(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  k: v\n"
}

// The inventory records what each commit applied; what a commit no longer
// renders stays until the cluster succeeded (prune true), then a pending
// run deletes it; a revert (prune now) deletes what the failed commit added
// and recreates what it pruned; prune false leaves it, forgotten; an
// object marked flotilla.dev/prune: disabled stays. Catches: pruning at
// the apply (before the analysis), pruning nothing, a revert that leaves
// the failed commit's objects, an inventory that is not the commit's.
func TestApplyManifestsPrunesByInventory(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "prune")
	url := gittest.NewRepo(t, map[string]string{
		"web/deployment.yaml": webDeployment,
		"web/config.yaml":     webConfig("hello"),
		"web/extra.yaml":      namedConfig("web-extra"),
	})
	first := gittest.Head(t, url).Hash.String()
	second := gittest.Commit(t, url, "main", "drop web-extra", map[string]string{"web/extra.yaml": ""})
	third := gittest.Commit(t, url, "main", "add web-new", map[string]string{"web/new.yaml": namedConfig("web-new")})
	app := policy(ns)
	app.Delivery.Autoscale, app.Delivery.TrafficAnalysis.Metrics = nil, nil
	app.Delivery.Suspend = true
	mirror := gitops.NewMirror(t.TempDir())
	run := func(rollout, commit, prune string) {
		t.Helper()
		if _, err := tasks.ApplyManifests(ctx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Workload: "web", Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: rollout}).Canary,
			URL: url, Commit: commit, Paths: []string{"web"}, Application: "web", Prune: prune,
		}); err != nil {
			t.Fatalf("ApplyManifests(%s, %s, prune %s): %v", rollout, commit, prune, err)
		}
	}
	exists := func(name string) bool {
		t.Helper()
		_, err := cl.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// A deleted ConfigMap may linger while a finalizer runs: none here,
	// and a background deletion of a ConfigMap is immediate.
	present := func(want map[string]bool) {
		t.Helper()
		for name, w := range want {
			if got := exists(name); got != w {
				t.Errorf("ConfigMap %s exists = %t, want %t", name, got, w)
			}
		}
	}
	inventory := func(commit string, entries, pending []string) {
		t.Helper()
		inv, err := tasks.ReadInventory(ctx, cl.Kube, ns, "web")
		if err != nil {
			t.Fatal(err)
		}
		ids := func(es []tasks.InventoryEntry) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.ID)
			}
			return out
		}
		got := []any{inv.Revision, ids(inv.Entries), ids(inv.Pending)}
		want := []any{tasks.Revision(url, commit), entries, pending}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("inventory (-want +got):\n%s", d)
		}
	}
	id := func(kind, name string) string {
		if kind == "Deployment" {
			return ns + "_" + name + "_apps_Deployment"
		}
		return ns + "_" + name + "__" + kind
	}
	run("r1", first, tasks.PruneAfter)
	present(map[string]bool{"web-config": true, "web-extra": true})
	inventory(first, []string{id("ConfigMap", "web-config"), id("ConfigMap", "web-extra"), id("Deployment", "web")}, nil)

	// The second commit drops web-extra: it stays until the cluster
	// succeeded.
	run("r2", second, tasks.PruneAfter)
	present(map[string]bool{"web-extra": true})
	inventory(second, []string{id("ConfigMap", "web-config"), id("Deployment", "web")}, []string{id("ConfigMap", "web-extra")})
	// A pending run of another commit (a stale success) deletes nothing.
	run("r1-prune", first, tasks.PrunePending)
	present(map[string]bool{"web-extra": true})
	run("r2-prune", second, tasks.PrunePending)
	present(map[string]bool{"web-config": true, "web-extra": false})
	inventory(second, []string{id("ConfigMap", "web-config"), id("Deployment", "web")}, nil)

	// The third adds web-new and fails: its revert deletes it.
	run("r3", third, tasks.PruneAfter)
	present(map[string]bool{"web-new": true})
	run("r3-revert", second, tasks.PruneNow)
	present(map[string]bool{"web-new": false, "web-config": true})
	inventory(second, []string{id("ConfigMap", "web-config"), id("Deployment", "web")}, nil)

	// A revert to the first commit recreates what the second pruned.
	run("r2-revert", first, tasks.PruneNow)
	present(map[string]bool{"web-extra": true})

	// prune false leaves what a commit drops, forgotten by the inventory.
	run("r4", second, tasks.PruneOff)
	present(map[string]bool{"web-extra": true})
	inventory(second, []string{id("ConfigMap", "web-config"), id("Deployment", "web")}, nil)

	// An object marked flotilla.dev/prune: disabled stays.
	run("r5", third, tasks.PruneAfter)
	cm, err := cl.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "web-new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{tasks.AnnotationPrune: "disabled"}
	if _, err := cl.Kube.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	run("r5-revert", second, tasks.PruneNow)
	present(map[string]bool{"web-new": true})
}

// The pruned result names the objects deleted, and past its size counts
// the rest: a Tekton result travels in a 4 KiB termination message.
func TestPrunedResult(t *testing.T) {
	many := make([]string, 200)
	for i := range many {
		many[i] = "ConfigMap/default/config-map-with-a-long-name-" + strings.Repeat("x", 3) + string(rune('a'+i%26))
	}
	tests := []struct {
		name      string
		deleted   []string
		wantCount int
		wantNames int
	}{
		{"none", nil, 0, 0},
		{"one", []string{"ConfigMap/default/extra"}, 1, 1},
		{"two", []string{"ConfigMap/default/a", "Service/default/b"}, 2, 2},
		{"more than fit", many, 200, 39},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := tasks.EncodePruned(tc.deleted)
			if len(enc) > 2048 {
				t.Errorf("encoded %d bytes, over 2 KiB", len(enc))
			}
			names, count := tasks.DecodePruned(enc)
			if diff := cmp.Diff([]int{tc.wantCount, tc.wantNames}, []int{count, len(names)}); diff != "" {
				t.Errorf("count, names (-want +got):\n%s\n%s", diff, enc)
			}
			if diff := cmp.Diff(tc.deleted[:len(names)], names, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}
