package tasks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

func shopJob(greeting string) string {
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: shop-migrate
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: registry.example.com/migrate:1
          args: [` + greeting + `]
`
}

// shopDeployment is a Deployment name whose container says greeting.
func shopDeployment(name, greeting string) string {
	return strings.NewReplacer("{name}", name, "{greeting}", greeting).Replace(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  selector:
    matchLabels: {app: {name}}
  template:
    metadata:
      labels: {app: {name}}
    spec:
      containers:
        - name: web
          image: registry.example.com/{name}:1
          args: [{greeting}]
`)
}

// shopMember is a member of the shop set with a quick blue/green policy
// (no metrics); gate, when set, is its pre-rollout webhook.
func shopMember(ns, name, gate string, rollout string, revert bool) tasks.SetMember {
	app := config.Application{
		Name: name, Namespace: ns,
		Workload: config.Workload{Kind: config.KindDeployment, Name: name},
		Service:  config.Service{Port: 80},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes,
			Interval: config.Duration{Duration: 2 * time.Second}, Iterations: 3, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
		},
	}
	if gate != "" {
		app.Delivery.Webhooks = []config.Webhook{{Name: "gate", Type: "pre-rollout", URL: gate, Timeout: config.Duration{Duration: 5 * time.Second}}}
	}
	return tasks.SetMember{
		Application: name, Kind: config.KindDeployment, Workload: name,
		Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: rollout, SkipAnalysis: revert}).Canary,
		Paths:  []string{"shop/" + strings.TrimPrefix(name, "shop-")}, Prune: tasks.PruneAfter,
	}
}

// orderWatch records, while a set is applied, the moments a member was
// applied before the one it depends on was ready: the api's Deployment
// before the Job completed at the revision, the frontend's before the
// api's primary ran it.
type orderWatch struct {
	mu         sync.Mutex
	violations []string
}

func (w *orderWatch) run(ctx context.Context, cl *fleettest.Clients, ns, revision string) {
	for ctx.Err() == nil {
		job, jerr := cl.Kube.BatchV1().Jobs(ns).Get(ctx, "shop-migrate", metav1.GetOptions{})
		jobDone := jerr == nil && job.Spec.Template.Annotations[canary.AnnotationRevision] == revision && complete(job)
		api, aerr := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "shop-api", metav1.GetOptions{})
		apiPrimary, perr := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "shop-api-primary", metav1.GetOptions{})
		fe, ferr := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "shop-frontend", metav1.GetOptions{})
		w.mu.Lock()
		if aerr == nil && api.Spec.Template.Annotations[canary.AnnotationRevision] == revision && !jobDone && ctx.Err() == nil {
			w.violations = append(w.violations, "shop-api applied before the Job completed")
		}
		if ferr == nil && fe.Spec.Template.Annotations[canary.AnnotationRevision] == revision &&
			(perr != nil || apiPrimary.Spec.Template.Annotations[canary.AnnotationRevision] != revision) && ctx.Err() == nil {
			w.violations = append(w.violations, "shop-frontend applied before shop-api's primary ran the revision")
		}
		w.mu.Unlock()
		time.Sleep(100 * time.Millisecond)
	}
}

func complete(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// A release set's members are applied in order, each once the one before
// is ready: the migration Job complete at the commit before the api is
// applied, the api's primary on the commit before the frontend is; the
// api's canary lists every canary of the set. The next commit with the
// api's gate failing stops at the api: the frontend keeps the first
// commit and the error names the api. Catches: members applied together
// (the frontend on a commit whose api was not promoted), a Job that is
// not recreated for the next commit (its template is immutable: the apply
// fails), a failed canary waited on until the deadline, the next member
// applied after one failed.
func TestApplySetInOrder(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "shop")
	url := gittest.NewRepo(t, map[string]string{
		"shop/migrate/job.yaml":      shopJob("v1"),
		"shop/api/deploy.yaml":       shopDeployment("shop-api", "hello"),
		"shop/frontend/deploy.yaml":  shopDeployment("shop-frontend", "hello"),
		"unrelated/of/the/repo.yaml": "",
	})
	first := gittest.Head(t, url).Hash.String()
	second := gittest.Commit(t, url, "main", "v2", map[string]string{
		"shop/migrate/job.yaml":     shopJob("v2"),
		"shop/api/deploy.yaml":      shopDeployment("shop-api", "hej"),
		"shop/frontend/deploy.yaml": shopDeployment("shop-frontend", "hej"),
	})
	third := gittest.Commit(t, url, "main", "v3", map[string]string{
		"shop/migrate/job.yaml": shopJob("v3"),
		"shop/api/deploy.yaml":  shopDeployment("shop-api", "broken"),
	})
	var gateCalls atomic.Int32
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		gateCalls.Add(1)
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(gate.Close)
	mirror := gitops.NewMirror(t.TempDir())
	apply := func(rollout, commit, apiGate string) error {
		t.Helper()
		revert := strings.HasSuffix(rollout, "-revert")
		members := []tasks.SetMember{
			{Application: "shop-migrate", Kind: tasks.KindJob, Workload: "shop-migrate", Paths: []string{"shop/migrate"}, Prune: tasks.PruneAfter},
			shopMember(ns, "shop-api", apiGate, rollout, revert),
			shopMember(ns, "shop-frontend", "", rollout, revert),
		}
		lead := members[1]
		if revert {
			slices.Reverse(members)
		}
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		_, err := tasks.ApplyManifests(actx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Kind: config.KindDeployment, Workload: "shop-api", Canary: lead.Canary,
			URL: url, Commit: commit, Application: "shop", Members: members,
		})
		return err
	}

	if err := apply("r1", first, ""); err != nil {
		t.Fatal(err)
	}
	// The second commit is analysed (three iterations each): its api is
	// promoted seconds after it is applied, and only then its frontend.
	wctx, stop := context.WithCancel(ctx)
	var w orderWatch
	done := make(chan struct{})
	go func() { defer close(done); w.run(wctx, cl, ns, tasks.Revision(url, second)) }()
	err := apply("r2", second, "")
	stop()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if len(w.violations) > 0 {
		t.Errorf("order: %v", w.violations[0])
	}
	for _, name := range []string{"shop-api-primary", "shop-frontend-primary"} {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Spec.Template.Annotations[canary.AnnotationRevision], tasks.Revision(url, second); got != want {
			t.Errorf("%s runs %q once the set was applied, want %q", name, got, want)
		}
	}
	lead, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "shop-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := lead.Annotations[canary.AnnotationWorkloads], "shop-api,shop-frontend"; got != want {
		t.Errorf("the lead's canary lists %q, want %q", got, want)
	}
	fe, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "shop-frontend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := fe.Annotations[canary.AnnotationWorkloads]; ok {
		t.Errorf("the frontend's canary lists %q, want none (the lead lists the set)", got)
	}
	for _, name := range []string{"shop-migrate", "shop-api", "shop-frontend"} {
		inv, err := tasks.ReadInventory(ctx, cl.Kube, ns, name)
		if err != nil || len(inv.Entries) == 0 {
			t.Errorf("the inventory of %s: %v, %d entries; want the member's own", name, err, len(inv.Entries))
		}
	}

	err = apply("r3", third, gate.URL)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "shop-api: canary shop-api failed") {
		t.Fatalf("ApplyManifests(the api's gate failing) = %v, want a permanent error naming the api's canary", err)
	}
	if gateCalls.Load() == 0 {
		t.Errorf("the api's gate was never called: Flagger did not analyse the api")
	}
	job, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, "shop-migrate", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{"job": job.Spec.Template.Annotations[canary.AnnotationRevision]}
	for _, name := range []string{"shop-frontend", "shop-frontend-primary", "shop-api-primary"} {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got[name] = d.Spec.Template.Annotations[canary.AnnotationRevision]
	}
	want := map[string]string{
		"job":                   tasks.Revision(url, third),
		"shop-frontend":         tasks.Revision(url, second),
		"shop-frontend-primary": tasks.Revision(url, second),
		"shop-api-primary":      tasks.Revision(url, second),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("revisions after the api failed (-want +got):\n%s", d)
	}
	if !complete(job) {
		t.Errorf("the third commit's Job: %s", fmt.Sprint(job.Status.Conditions))
	}

	// The revert (dependents first, no analysis) waits for the api's
	// primary and workload back on the second commit, its Failed phase
	// left from the failed analysis, and for the second commit's Job.
	if err := apply("r3-revert", second, gate.URL); err != nil {
		t.Fatalf("the revert: %v", err)
	}
	for _, name := range []string{"shop-api", "shop-api-primary", "shop-frontend"} {
		d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Spec.Template.Annotations[canary.AnnotationRevision], tasks.Revision(url, second); got != want {
			t.Errorf("%s runs %q after the revert, want %q", name, got, want)
		}
	}
	if job, err = cl.Kube.BatchV1().Jobs(ns).Get(ctx, "shop-migrate", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if !complete(job) || job.Spec.Template.Annotations[canary.AnnotationRevision] != tasks.Revision(url, second) {
		t.Errorf("the Job after the revert: complete %t, revision %q", complete(job), job.Spec.Template.Annotations[canary.AnnotationRevision])
	}
}
