package tasks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// pinned is name's image at a digest made of version.
func pinned(name, version string) string {
	h := sha256.Sum256([]byte(name + version))
	return "registry.example.com/" + name + "@sha256:" + hex.EncodeToString(h[:])
}

// createWebDeployment creates the Deployment name in ns, its pods labelled
// app=name, its container web running image.
func createWebDeployment(t *testing.T, cl *fleettest.Clients, ns, name, image string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "side", Image: "registry.example.com/side:1"}, {Name: "web", Image: image}}},
			},
		},
	}
	if _, err := cl.Kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// templateOf is the Deployment name's container web image and template
// revision ("" and "" when it is not there).
func templateOf(ctx context.Context, cl *fleettest.Clients, ns, name string) (image, revision string) {
	d, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", ""
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "web" {
			image = c.Image
		}
	}
	return image, d.Spec.Template.Annotations[canary.AnnotationRevision]
}

// A release set of image members (an api, then the frontend depending on
// it) is applied in order, each member's container set to its image with
// the image as its revision, the frontend only once the api's primary runs
// its new image; the api's canary lists both. The api's analysis failing
// stops the run naming the api, the frontend untouched; the revert (the
// frontend first, unchanged: ready at once) puts the api back. Catches:
// members set together, the image set on the wrong container, a failed
// canary waited on until the deadline, the member after a failed one
// applied, a revert that does not wait for the api's primary.
func TestApplyImageSetInOrder(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "web")
	createWebDeployment(t, cl, ns, "web-api", "registry.example.com/web-api:0")
	createWebDeployment(t, cl, ns, "web-frontend", "registry.example.com/web-frontend:0")
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	t.Cleanup(gate.Close)
	apply := func(rollout, api, frontend, apiGate string) error {
		t.Helper()
		revert := strings.HasSuffix(rollout, "-revert")
		members := []tasks.SetMember{shopMember(ns, "web-api", apiGate, rollout, revert), shopMember(ns, "web-frontend", "", rollout, revert)}
		for i, image := range []string{api, frontend} {
			members[i].Paths, members[i].Prune, members[i].Image, members[i].Container = nil, "", image, "web"
		}
		lead := members[0]
		if revert {
			slices.Reverse(members)
		}
		actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		_, err := tasks.ApplyImageSet(actx, cl.Config, tasks.ApplyCanaryParams{
			Rollout: rollout, Namespace: ns, Kind: config.KindDeployment, Workload: "web-api", Canary: lead.Canary,
		}, members)
		return err
	}
	if err := apply("r1", pinned("web-api", "1"), pinned("web-frontend", "1"), ""); err != nil {
		t.Fatal(err)
	}
	// Both members move: the frontend's workload gets its image only once
	// the api's primary runs the api's.
	api2, fe2 := pinned("web-api", "2"), pinned("web-frontend", "2")
	wctx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var violation string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			_, feRev := templateOf(wctx, cl, ns, "web-frontend")
			_, apiPrimary := templateOf(wctx, cl, ns, "web-api-primary")
			if feRev == fe2 && apiPrimary != api2 && wctx.Err() == nil {
				mu.Lock()
				violation = "web-frontend set to its image before web-api's primary ran " + api2
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	err := apply("r2", api2, fe2, "")
	stop()
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if violation != "" {
		t.Errorf("order: %s", violation)
	}
	type state struct{ Image, Revision string }
	read := func(names ...string) map[string]state {
		out := map[string]state{}
		for _, n := range names {
			i, r := templateOf(ctx, cl, ns, n)
			out[n] = state{i, r}
		}
		return out
	}
	all := []string{"web-api", "web-api-primary", "web-frontend", "web-frontend-primary"}
	want := map[string]state{"web-api": {api2, api2}, "web-api-primary": {api2, api2}, "web-frontend": {fe2, fe2}, "web-frontend-primary": {fe2, fe2}}
	if d := cmp.Diff(want, read(all...)); d != "" {
		t.Errorf("after the set's second version (-want +got):\n%s", d)
	}
	lc, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lc.Annotations[canary.AnnotationWorkloads]; got != "web-api,web-frontend" {
		t.Errorf("the lead's canary lists %q, want web-api,web-frontend", got)
	}
	fc, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-frontend", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := fc.Annotations[canary.AnnotationWorkloads]; ok {
		t.Errorf("the frontend's canary lists %q, want none", got)
	}

	// The api's third image fails its analysis: the frontend's third is
	// never set.
	api3, fe3 := pinned("web-api", "3"), pinned("web-frontend", "3")
	err = apply("r3", api3, fe3, gate.URL)
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "web-api: canary web-api failed") {
		t.Fatalf("ApplyImageSet(the api's gate failing) = %v, want a permanent error naming the api's canary", err)
	}
	want = map[string]state{"web-api": {api3, api3}, "web-api-primary": {api2, api2}, "web-frontend": {fe2, fe2}, "web-frontend-primary": {fe2, fe2}}
	if d := cmp.Diff(want, read(all...)); d != "" {
		t.Errorf("after the api failed (-want +got):\n%s", d)
	}
	// The revert to the second version: the frontend first (unchanged),
	// then the api, waited for until its workload and primary run api2.
	if err := apply("r3-revert", api2, fe2, gate.URL); err != nil {
		t.Fatalf("the revert: %v", err)
	}
	want = map[string]state{"web-api": {api2, api2}, "web-api-primary": {api2, api2}, "web-frontend": {fe2, fe2}, "web-frontend-primary": {fe2, fe2}}
	if d := cmp.Diff(want, read(all...)); d != "" {
		t.Errorf("after the revert (-want +got):\n%s", d)
	}
}

// A set whose version has no entry for its lead yet (only the frontend
// was pushed so far) applies the lead's canary all the same, listing the
// set's canaries, so the cluster is judged by it; the lead's workload is
// left as the cluster runs it (no image, no revision, no rollout's mark)
// and not waited for; the frontend is set and waited for. Catches: the
// lead left out (no canary listing the frontend), its workload patched.
func TestApplyImageSetLeadWithoutVersion(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "web")
	createWebDeployment(t, cl, ns, "web-api", "registry.example.com/web-api:0")
	createWebDeployment(t, cl, ns, "web-frontend", "registry.example.com/web-frontend:0")
	fe1 := pinned("web-frontend", "1")
	members := []tasks.SetMember{shopMember(ns, "web-api", "", "r1", false), shopMember(ns, "web-frontend", "", "r1", false)}
	for i, image := range []string{"", fe1} {
		members[i].Paths, members[i].Prune, members[i].Image, members[i].Container = nil, "", image, "web"
	}
	actx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if _, err := tasks.ApplyImageSet(actx, cl.Config, tasks.ApplyCanaryParams{
		Rollout: "r1", Namespace: ns, Kind: config.KindDeployment, Workload: "web-api", Canary: members[0].Canary,
	}, members); err != nil {
		t.Fatal(err)
	}
	lc, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-api", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lead's canary: %v", err)
	}
	if got := lc.Annotations[canary.AnnotationWorkloads]; got != "web-api,web-frontend" {
		t.Errorf("the lead's canary lists %q, want web-api,web-frontend", got)
	}
	api, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type state struct{ Image, Revision, Rollout string }
	got := state{Rollout: api.Annotations[tasks.AnnotationRollout], Revision: api.Spec.Template.Annotations[canary.AnnotationRevision]}
	got.Image, _ = templateOf(ctx, cl, ns, "web-api")
	if d := cmp.Diff(state{Image: "registry.example.com/web-api:0"}, got); d != "" {
		t.Errorf("the lead's workload (-want +got):\n%s", d)
	}
	for _, name := range []string{"web-frontend", "web-frontend-primary"} {
		if image, rev := templateOf(ctx, cl, ns, name); image != fe1 || rev != fe1 {
			t.Errorf("%s runs %s (revision %s), want %s", name, image, rev, fe1)
		}
	}
}
