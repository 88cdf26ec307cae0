package tasks_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// fleet is one cluster, started by TestMain unless the tests run -short;
// FLOTILLA_FLEET_DIR reuses a running fleet instead.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(fleettest.Main(m, fleettest.Options{Clusters: 1}, &fleet))
}

func clients(t *testing.T) *fleettest.Clients {
	t.Helper()
	if fleet == nil {
		t.Skip("needs a cluster: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	cl, err := fleettest.NewClients(fleet.Clusters[0])
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// createDeployment creates the Deployment name in ns running image.
func createDeployment(t *testing.T, cl *fleettest.Clients, ns, name, image string) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: podSpec(image),
		},
	}
	if _, err := cl.Kube.AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podSpec(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
	}
}

// policy is an application whose canary refers to an autoscaler and a
// custom metric's MetricTemplate, which the task must apply before it.
func policy(ns string) config.Application {
	return config.Application{
		Name: "web", Namespace: ns,
		Workload: config.Workload{Kind: config.KindDeployment, Name: "web"},
		Service:  config.Service{Port: 80},
		Delivery: config.Delivery{
			Strategy: config.StrategyBlueGreen, Provider: config.ProviderKubernetes,
			Interval: config.Duration{Duration: time.Minute}, Iterations: 2, Threshold: 1,
			ProgressDeadline: config.Duration{Duration: time.Minute},
			Autoscale:        &config.Autoscale{MinReplicas: 1, MaxReplicas: 3},
			TrafficAnalysis: config.TrafficAnalysis{Metrics: []config.Metric{{
				Name: "errors", Interval: config.Duration{Duration: time.Minute},
				ThresholdRange: &config.ThresholdRange{Max: new(float64)},
				CustomMetric:   &config.CustomMetric{Provider: config.MetricProvider{Type: "prometheus"}, Query: "vector(0)"},
			}}},
		},
	}
}

func TestApplyCanaryAppliesWhatTheCanaryRefersTo(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	createDeployment(t, cl, ns, "web", "registry.example.com/web:1")
	objs := canary.Render(policy(ns), canary.Input{Cluster: "c1", Rollout: "r1"})
	deps, err := objs.Dependencies()
	if err != nil {
		t.Fatal(err)
	}
	res, err := tasks.ApplyCanary(ctx, cl.Config, tasks.ApplyCanaryParams{
		Rollout: "r1", Namespace: ns, Kind: "Deployment", Workload: "web", Image: "registry.example.com/web@sha256:" + strings.Repeat("a", 64),
		Canary: objs.Canary, Objects: deps,
	})
	if err != nil {
		t.Fatalf("ApplyCanary: %v", err)
	}
	if res.PreviousImage != "registry.example.com/web:1" || !res.Changed {
		t.Errorf("result = %+v, want the previous image and a change", res)
	}
	if _, err := cl.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("autoscaler: %v", err)
	}
	if _, err := cl.Flagger.FlaggerV1beta1().MetricTemplates(ns).Get(ctx, "web-errors", metav1.GetOptions{}); err != nil {
		t.Errorf("metric template: %v", err)
	}
	if _, err := cl.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("canary: %v", err)
	}
}

func TestApplyCanaryDaemonSet(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: podSpec("registry.example.com/agent:1"),
		},
	}
	if _, err := cl.Kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	app := policy(ns)
	app.Name, app.Workload = "agent", config.Workload{Kind: config.KindDaemonSet, Name: "agent"}
	app.Delivery.Autoscale, app.Delivery.TrafficAnalysis = nil, config.TrafficAnalysis{}
	image := "registry.example.com/agent@sha256:" + strings.Repeat("b", 64)
	p := tasks.ApplyCanaryParams{
		Rollout: "r1", Namespace: ns, Kind: "DaemonSet", Workload: "agent", Image: image,
		Canary: canary.Render(app, canary.Input{Cluster: "c1", Rollout: "r1"}).Canary,
	}
	res, err := tasks.ApplyCanary(ctx, cl.Config, p)
	if err != nil {
		t.Fatalf("ApplyCanary: %v", err)
	}
	if res.PreviousImage != "registry.example.com/agent:1" || !res.Changed {
		t.Errorf("result = %+v, want the previous image and a change", res)
	}
	got, err := cl.Kube.AppsV1().DaemonSets(ns).Get(ctx, "agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := got.Spec.Template.Spec.Containers[0].Image; img != image {
		t.Errorf("daemonset image = %s, want %s", img, image)
	}
	if got.Annotations[tasks.AnnotationRollout] != "r1" {
		t.Errorf("daemonset annotations = %v, want the rollout", got.Annotations)
	}
}

func TestApplyCanaryPermanentErrors(t *testing.T) {
	cl := clients(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns := cl.Namespace(ctx, t, "task")
	for _, tt := range []struct {
		name, kind, want string
	}{
		{"missing daemonset", "DaemonSet", "daemonset " + ns + "/gone not found"},
		{"unknown kind", "StatefulSet", `workload kind "StatefulSet": want Deployment or DaemonSet`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tasks.ApplyCanary(ctx, cl.Config, tasks.ApplyCanaryParams{Rollout: "r1", Namespace: ns, Kind: tt.kind, Workload: "gone", Image: "x"})
			if !fault.IsPermanent(err) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ApplyCanary = %v, want a permanent error saying %q", err, tt.want)
			}
		})
	}
}

// What a rollback goes back to is what the primary runs (the version
// Flagger promoted), not the workload's image, which an earlier rollout
// superseded mid-way may have left at a version never validated.
func TestApplyCanaryRecordsThePrimarysImage(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	for name, image := range map[string]string{"web": "registry.example.com/web:unvalidated", "web-primary": "registry.example.com/web:validated"} {
		createDeployment(t, cl, ns, name, image)
	}
	objs := canary.Render(policy(ns), canary.Input{Cluster: "c1", Rollout: "r2"})
	res, err := tasks.ApplyCanary(ctx, cl.Config, tasks.ApplyCanaryParams{
		Rollout: "r2", Namespace: ns, Kind: "Deployment", Workload: "web", Image: "registry.example.com/web@sha256:" + strings.Repeat("b", 64),
		Canary: objs.Canary,
	})
	if err != nil {
		t.Fatalf("ApplyCanary: %v", err)
	}
	if res.PreviousImage != "registry.example.com/web:validated" {
		t.Errorf("previous image %q, want the primary's", res.PreviousImage)
	}
}

// A retry applies the same image with a restart token on the pod template:
// a new revision for Flagger, reported as a change; the same token again
// changes nothing, and an apply without one leaves the token alone.
func TestApplyCanaryRestart(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	image := "registry.example.com/web@sha256:" + strings.Repeat("c", 64)
	createDeployment(t, cl, ns, "web", image)
	objs := canary.Render(policy(ns), canary.Input{Cluster: "c1", Rollout: "r3"})
	for _, tt := range []struct {
		restart     string
		wantChanged bool
		wantToken   string
	}{
		{"", false, ""},
		{"r3/1", true, "r3/1"},
		{"r3/1", false, "r3/1"},
		{"", false, "r3/1"},
		{"r3/2", true, "r3/2"},
	} {
		res, err := tasks.ApplyCanary(ctx, cl.Config, tasks.ApplyCanaryParams{
			Rollout: "r3", Namespace: ns, Kind: "Deployment", Workload: "web", Image: image, Canary: objs.Canary, Restart: tt.restart,
		})
		if err != nil {
			t.Fatalf("ApplyCanary(restart %q): %v", tt.restart, err)
		}
		got, err := cl.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Changed != tt.wantChanged || got.Spec.Template.Annotations[tasks.AnnotationRestart] != tt.wantToken {
			t.Errorf("restart %q: changed %v, token %q; want %v, %q", tt.restart, res.Changed,
				got.Spec.Template.Annotations[tasks.AnnotationRestart], tt.wantChanged, tt.wantToken)
		}
	}
}

// A run of one rollout done again (its answer lost in a crash, or to a
// journal that did not acknowledge it) finds the workload set: it reports
// what the first run did, except the change, and patches nothing, as the
// API server's audit log shows.
func TestApplyCanaryAgainPatchesNothing(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	createDeployment(t, cl, ns, "web", "registry.example.com/web:1")
	objs := canary.Render(policy(ns), canary.Input{Cluster: "c1", Rollout: "r4"})
	apply := func(rollout, image string) tasks.ApplyCanaryResult {
		t.Helper()
		res, err := tasks.ApplyCanary(ctx, cl.Config, tasks.ApplyCanaryParams{
			Rollout: rollout, Namespace: ns, Kind: "Deployment", Workload: "web", Image: image, Canary: objs.Canary,
		})
		if err != nil {
			t.Fatalf("ApplyCanary(%s, %s): %v", rollout, image, err)
		}
		return res
	}
	image := "registry.example.com/web@sha256:" + strings.Repeat("d", 64)
	got := []tasks.ApplyCanaryResult{
		apply("r4", image), apply("r4", image),
		// Another rollout of the same image (a revert of a revert) is
		// patched: the workload must say which rollout set it.
		apply("r5", image),
	}
	want := []tasks.ApplyCanaryResult{
		{PreviousImage: "registry.example.com/web:1", Changed: true},
		{PreviousImage: "registry.example.com/web:1"},
		{PreviousImage: image},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	patches, err := fleettest.Patches(fleet.Clusters[0].AuditLog, "deployments", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	var mine int
	for _, p := range patches {
		// A patch refused with a conflict (the workload's controller
		// updated its status between the read and the patch) changed
		// nothing: read again and patched.
		if p.FieldManager == tasks.FieldManager && p.Code < 300 {
			mine++
		}
	}
	if mine != 2 {
		t.Errorf("the API server recorded %d patches of the workload by flotilla, want 2 (r4 once, r5 once)", mine)
	}
}

// TestApplyCanaryAtOncePatchesOnce: two runs of one rollout at once (a
// replica's run still in flight when the partition's next holder runs the
// request again: a scale-out rolling restart's CI failure, "patched ...
// for rollout X 2 times") both read the workload before either patches;
// the API server takes one patch and refuses the other with a conflict,
// whose run reads the workload again and finds it set. Without the
// resourceVersion precondition both patches land.
func TestApplyCanaryAtOncePatchesOnce(t *testing.T) {
	cl := clients(t)
	ctx := t.Context()
	ns := cl.Namespace(ctx, t, "task")
	createDeployment(t, cl, ns, "web", "registry.example.com/web:1")
	objs := canary.Render(policy(ns), canary.Input{Cluster: "c1", Rollout: "r6"})
	// Both runs' first patch waits until both runs sent theirs: each has
	// read the workload by then.
	gate := &patchGate{both: make(chan struct{})}
	cfg := rest.CopyConfig(cl.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/deployments/web") {
				gate.wait(r.Context())
			}
			return rt.RoundTrip(r)
		})
	}
	image := "registry.example.com/web@sha256:" + strings.Repeat("e", 64)
	results := make([]tasks.ApplyCanaryResult, 2)
	var g errgroup.Group
	for i := range results {
		g.Go(func() (err error) {
			results[i], err = tasks.ApplyCanary(ctx, cfg, tasks.ApplyCanaryParams{
				Rollout: "r6", Namespace: ns, Kind: "Deployment", Workload: "web", Image: image, Canary: objs.Canary,
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.PreviousImage != "registry.example.com/web:1" {
			t.Errorf("run %d: previous image %q, want registry.example.com/web:1", i, r.PreviousImage)
		}
	}
	patches, err := fleettest.Patches(fleet.Clusters[0].AuditLog, "deployments", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	var landed, refused int
	for _, p := range patches {
		switch {
		case p.FieldManager != tasks.FieldManager:
		case p.Code < 300:
			landed++
		case p.Code == http.StatusConflict:
			refused++
		}
	}
	// More conflicts are the workload's controller updating its status
	// meanwhile: read again, and patched or found set.
	if landed != 1 || refused < 1 {
		t.Errorf("the API server recorded %d patches of the workload by flotilla that landed and %d refused with a conflict, want 1 and at least 1", landed, refused)
	}
}

// patchGate holds the first two patches until both arrived.
type patchGate struct {
	mu   sync.Mutex
	n    int
	both chan struct{}
}

func (g *patchGate) wait(ctx context.Context) {
	g.mu.Lock()
	g.n++
	if g.n == 2 {
		close(g.both)
	}
	n := g.n
	g.mu.Unlock()
	if n > 2 {
		return
	}
	select {
	case <-g.both:
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
