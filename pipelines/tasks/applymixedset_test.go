package tasks_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// A release set of git and image members (the migration Job and the api
// from the repository, the frontend an image) is applied by one
// apply-manifests run in dependsOn order across kinds: the Job complete
// and the api's primary on the commit before the frontend's image is set,
// the frontend waited for until its primary runs its image; the api's
// canary lists both canaries; the run reports each canaried member's
// previous (the api's revision, the frontend's image). The api's next
// commit failing stops the run naming the api, the frontend's next image
// never set; the revert (the frontend first, then the api at the
// previous commit) puts both back. Catches: the frontend rendered from
// paths it has not, the frontend set before the api was promoted, no
// previous members reported (a cluster's previous version lost), a revert
// that leaves the api on the failed commit.
func TestApplyMixedSetInOrder(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "shop")
	createWebDeployment(t, cl, ns, "shop-frontend", "registry.example.com/shop-frontend:0")
	url := gittest.NewRepo(t, map[string]string{
		"shop/migrate/job.yaml": shopJob("v1"),
		"shop/api/deploy.yaml":  shopDeployment("shop-api", "hello"),
	})
	first := gittest.Head(t, url).Hash.String()
	second := gittest.Commit(t, url, "main", "v2", map[string]string{
		"shop/migrate/job.yaml": shopJob("v2"),
		"shop/api/deploy.yaml":  shopDeployment("shop-api", "broken"),
	})
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	t.Cleanup(gate.Close)
	mirror := gitops.NewMirror(t.TempDir())
	apply := func(rollout, commit, frontend, apiGate string) (tasks.ApplyCanaryResult, error) {
		t.Helper()
		revert := strings.HasSuffix(rollout, "-revert")
		fe := shopMember(ns, "shop-frontend", "", rollout, revert)
		fe.Paths, fe.Prune, fe.Image, fe.Container = nil, "", frontend, "web"
		members := []tasks.SetMember{
			{Application: "shop-migrate", Kind: tasks.KindJob, Workload: "shop-migrate", Paths: []string{"shop/migrate"}, Prune: tasks.PruneAfter},
			shopMember(ns, "shop-api", apiGate, rollout, revert),
			fe,
		}
		lead := members[1]
		if revert {
			slices.Reverse(members)
		}
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		return tasks.ApplyManifests(actx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Kind: config.KindDeployment, Workload: "shop-api", Canary: lead.Canary,
			URL: url, Commit: commit, Application: "shop", Members: members,
		})
	}
	type state struct{ Image, Revision string }
	read := func() map[string]state {
		out := map[string]state{}
		for _, n := range []string{"shop-api-primary", "shop-frontend", "shop-frontend-primary"} {
			i, r := templateOf(ctx, cl, ns, n)
			if n == "shop-api-primary" {
				i = "" // rendered: its revision says which commit
			}
			out[n] = state{i, r}
		}
		return out
	}

	fe1 := pinned("shop-frontend", "1")
	wctx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var violation string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			_, feRev := templateOf(wctx, cl, ns, "shop-frontend")
			_, apiPrimary := templateOf(wctx, cl, ns, "shop-api-primary")
			if feRev == fe1 && apiPrimary != tasks.Revision(url, first) && wctx.Err() == nil {
				mu.Lock()
				violation = "shop-frontend set to its image before shop-api's primary ran the commit"
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	res, err := apply("r1", first, fe1, "")
	stop()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if violation != "" {
		t.Errorf("order: %s", violation)
	}
	want := map[string]state{"shop-api-primary": {"", tasks.Revision(url, first)}, "shop-frontend": {fe1, fe1}, "shop-frontend-primary": {fe1, fe1}}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the first version (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"shop-api": "", "shop-frontend": "registry.example.com/shop-frontend:0"}, res.PreviousMembers); d != "" {
		t.Errorf("previous members of the first version (-want +got):\n%s", d)
	}
	lc, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "shop-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lc.Annotations[canary.AnnotationWorkloads]; got != "shop-api,shop-frontend" {
		t.Errorf("the lead's canary lists %q, want shop-api,shop-frontend", got)
	}

	// The next commit's api fails its analysis: the frontend's next
	// image is never set.
	fe2 := pinned("shop-frontend", "2")
	_, err = apply("r2", second, fe2, gate.URL)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "shop-api: canary shop-api failed") {
		t.Fatalf("ApplyManifests(the api's gate failing) = %v, want a permanent error naming the api's canary", err)
	}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the api failed (-want +got):\n%s", d)
	}
	// The revert to the first version: the frontend first (unchanged),
	// then the api at the first commit, then the Job.
	if _, err := apply("r2-revert", first, fe1, gate.URL); err != nil {
		t.Fatalf("the revert: %v", err)
	}
	if _, rev := templateOf(ctx, cl, ns, "shop-api"); rev != tasks.Revision(url, first) {
		t.Errorf("shop-api runs %q after the revert, want the first commit", rev)
	}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the revert (-want +got):\n%s", d)
	}
}

// A set of git and image members led by its image member (the frontend,
// listed first and depending on nothing; docs/design/release-sets.md, "An
// image lead"): the set's first commit, with no entry of the frontend, is
// applied with the frontend's canary only, listing the api's, its
// workload untouched, then the Job and the api; the next version, the
// frontend's image with it, sets the frontend first and waits for its
// primary, the api unchanged and ready at once; each run reports the
// previous of the members it set. A revert to the version without the
// frontend's entry applies its canary last, still listing both. Catches:
// the image lead rendered from paths it has not (the run failing), its
// canary not applied or not listing the api's (the cluster judged by the
// frontend alone), its workload set to an empty image.
func TestApplyMixedSetImageLead(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "shop")
	fe0 := "registry.example.com/shop-frontend:0"
	createWebDeployment(t, cl, ns, "shop-frontend", fe0)
	url := gittest.NewRepo(t, map[string]string{
		"shop/migrate/job.yaml": shopJob("v1"),
		"shop/api/deploy.yaml":  shopDeployment("shop-api", "hello"),
	})
	first := gittest.Head(t, url).Hash.String()
	mirror := gitops.NewMirror(t.TempDir())
	apply := func(rollout, frontend string) (tasks.ApplyCanaryResult, error) {
		t.Helper()
		revert := strings.HasSuffix(rollout, "-revert")
		fe := shopMember(ns, "shop-frontend", "", rollout, revert)
		fe.Paths, fe.Prune, fe.Image, fe.Container = nil, "", frontend, "web"
		members := []tasks.SetMember{
			fe,
			{Application: "shop-migrate", Kind: tasks.KindJob, Workload: "shop-migrate", Paths: []string{"shop/migrate"}, Prune: tasks.PruneAfter},
			shopMember(ns, "shop-api", "", rollout, revert),
		}
		if revert {
			slices.Reverse(members)
		}
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		return tasks.ApplyManifests(actx, cl.Config, mirror, gitops.Repo{URL: url}, tasks.ApplyManifestsParams{
			Rollout: rollout, Namespace: ns, Kind: config.KindDeployment, Workload: "shop-frontend", Canary: fe.Canary,
			URL: url, Commit: first, Application: "shop", Members: members,
		})
	}
	type state struct{ Image, Revision string }
	read := func() map[string]state {
		out := map[string]state{}
		for _, n := range []string{"shop-api-primary", "shop-frontend"} {
			i, r := templateOf(ctx, cl, ns, n)
			if n == "shop-api-primary" {
				i = "" // rendered: its revision says which commit
			}
			out[n] = state{i, r}
		}
		return out
	}
	lists := func(when string) {
		t.Helper()
		lc, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "shop-frontend", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: the lead's canary: %v", when, err)
		}
		if got := lc.Annotations[canary.AnnotationWorkloads]; got != "shop-frontend,shop-api" {
			t.Errorf("%s: the lead's canary lists %q, want shop-frontend,shop-api", when, got)
		}
	}

	res, err := apply("r1", "")
	if err != nil {
		t.Fatalf("the first commit, the frontend without an entry: %v", err)
	}
	lists("the first commit")
	want := map[string]state{"shop-api-primary": {"", tasks.Revision(url, first)}, "shop-frontend": {fe0, ""}}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the first commit (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]any{"", map[string]string{"shop-api": ""}}, []any{res.PreviousImage, res.PreviousMembers}); d != "" {
		t.Errorf("previous (the lead's, each member's) of the first commit (-want +got):\n%s", d)
	}

	fe1 := pinned("shop-frontend", "1")
	if res, err = apply("r2", fe1); err != nil {
		t.Fatalf("the frontend's image: %v", err)
	}
	lists("the frontend's image")
	want["shop-frontend"] = state{fe1, fe1}
	if i, r := templateOf(ctx, cl, ns, "shop-frontend-primary"); i != fe1 || r != fe1 {
		t.Errorf("shop-frontend-primary runs %q (revision %q), want %s", i, r, fe1)
	}
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the frontend's image (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"shop-api": tasks.Revision(url, first), "shop-frontend": fe0}, res.PreviousMembers); d != "" {
		t.Errorf("previous members of the frontend's image (-want +got):\n%s", d)
	}

	// The revert to the first commit's version (no entry of the
	// frontend): the api first, the lead's canary last, still listing
	// both; the frontend left as it runs.
	if _, err := apply("r2-revert", ""); err != nil {
		t.Fatalf("the revert: %v", err)
	}
	lists("the revert")
	if d := cmp.Diff(want, read()); d != "" {
		t.Errorf("after the revert (-want +got):\n%s", d)
	}
}
