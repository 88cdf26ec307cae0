package pipelines_test

import (
	"github.com/google/go-cmp/cmp"

	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pipelines/embedded"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pipelines/tektonrun"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"knative.dev/pkg/apis"
)

// fleet has two clusters with Tekton, started by TestMain unless the tests
// run -short; FLOTILLA_FLEET_DIR reuses a running fleet instead. c1 runs the
// pipelines, c2 is the target.
var fleet *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	code := fleettest.Main(m, fleettest.Options{Clusters: 2, Tekton: true}, &fleet)
	if binaryDir != "" {
		// The binary flotillaBinary built (about 90 MB).
		_ = os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

func fleetClients(t *testing.T) (tekton, target *fleettest.Clients) {
	t.Helper()
	if fleet == nil {
		t.Skip("needs the local fleet: run without -short (FLOTILLA_FLEET_DIR reuses a running fleet)")
	}
	var err error
	if tekton, err = fleettest.NewClients(fleet.Clusters[0]); err != nil {
		t.Fatal(err)
	}
	if target, err = fleettest.NewClients(fleet.Clusters[1]); err != nil {
		t.Fatal(err)
	}
	return tekton, target
}

var (
	buildOnce sync.Once
	binary    string
	binaryDir string // holds binary; removed by TestMain
	buildErr  error
)

// flotillaBinary builds flotilla once for the test run: it stands for the
// image's flotilla in the steps run on the host.
func flotillaBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flotilla-bin-*")
		if err != nil {
			buildErr = err
			return
		}
		binaryDir = dir
		binary = filepath.Join(dir, "flotilla")
		out, err := exec.Command("go", "build", "-o", binary, "github.com/flotilla-cd/flotilla").CombinedOutput() //nolint:noctx // a build
		if err != nil {
			buildErr = err
			binary = string(out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building flotilla: %v\n%s", buildErr, binary)
	}
	return binary
}

type clusterSet map[string]*rest.Config

func (s clusterSet) Config(name string) (*rest.Config, error) { return s[name], nil }

// blueGreen is a Canary Flagger takes through 2 iterations 1s apart (the
// fleet's fast Flagger build allows 1s).
func blueGreen(name string) *flaggerv1.Canary {
	return &flaggerv1.Canary{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flaggerv1.CanarySpec{
			Provider:                "kubernetes",
			TargetRef:               flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			ProgressDeadlineSeconds: ptr.To[int32](120),
			Service:                 flaggerv1.CanaryService{Port: 9898},
			Analysis:                &flaggerv1.CanaryAnalysis{Interval: "1s", Threshold: 1, Iterations: 2},
		},
	}
}

func deployment(name, image string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: name, Image: image, Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9898}},
				}}},
			},
		},
	}
}

// install runs `flotilla pipelines install` against the Tekton cluster.
func install(t *testing.T, bin, kubeconfig, namespace string) {
	t.Helper()
	out, err := exec.Command(bin, "pipelines", "install", "--kubeconfig", kubeconfig, "--namespace", namespace).CombinedOutput() //nolint:noctx // bounded by the test
	if err != nil {
		t.Fatalf("flotilla pipelines install: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "Pipeline "+namespace+"/"+pipelines.PipelineName+" applied") {
		t.Errorf("flotilla pipelines install said:\n%s", out)
	}
}

func canaryPhase(ctx context.Context, t *testing.T, cl *fleettest.Clients, ns, name string, want flaggerv1.CanaryPhase) *flaggerv1.Canary {
	t.Helper()
	c, err := fleettest.Until(ctx, 90*time.Second, cl.Flagger.FlaggerV1beta1().RESTClient(), "canaries", ns, name,
		func(c *flaggerv1.Canary) (bool, error) {
			if c.Status.Phase == flaggerv1.CanaryPhaseFailed && want != flaggerv1.CanaryPhaseFailed {
				return false, fmt.Errorf("canary failed: %+v", c.Status.Conditions)
			}
			return c.Status.Phase == want, nil
		})
	if err != nil {
		t.Fatalf("canary %s/%s never reached %s: %v", ns, name, want, err)
	}
	return c
}

// TestTektonExecutorOnTheFleet runs the rollout pipeline for real: the
// embedded Tasks and Pipeline installed by `flotilla pipelines install` in
// c1's Tekton, PipelineRuns created by the Tekton executor for target c2,
// their steps' flotilla commands executed (on this machine, see
// fleettest.HostSteps), the canary and image applied in c2 through the
// kubeconfig Secret, the deployments repository bumped, and Flagger
// promoting the new image.
func TestTektonExecutorOnTheFleet(t *testing.T) {
	tk, target := fleetClients(t)
	bin := flotillaBinary(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	pns := tk.Namespace(ctx, t, "pipelines")
	install(t, bin, fleet.Clusters[0].Kubeconfig, pns)
	install(t, bin, fleet.Clusters[0].Kubeconfig, pns) // idempotent
	hs := fleettest.StartHostSteps(ctx, tk.Kube, pns, bin, t.Errorf)
	t.Cleanup(func() {
		hs.Stop()
		t.Logf("steps run on the host:\n%s", hs.Log())
	})

	ns := target.Namespace(ctx, t, "app")
	v1 := "registry.example.com/web:1"
	v2 := "registry.example.com/web@sha256:" + strings.Repeat("b", 64)
	d := deployment("web", v1)
	if _, err := target.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clusters := clusterSet{"c2": target.Config}

	repo := gittest.NewRepo(t, map[string]string{
		"apps/web/kustomization.yaml": "# web in production\nresources:\n  - deployment.yaml\nimages:\n  - name: registry.example.com/web\n    newTag: \"1\"\n",
	})
	gitops := &pipelines.GitOps{URL: repo, Branch: "main", Paths: []string{"apps/web/kustomization.yaml"}}
	seed := gittest.Head(t, repo)

	// The embedded executor puts the canary in place at the running image,
	// which the repository already names: Flagger initializes it.
	embedded := embedded.New(clusters)
	res, err := embedded.Run(ctx, "c2", pipelines.RunParams{Rollout: "r0", Namespace: ns, Workload: "web", Image: v1, Canary: blueGreen("web"), GitOps: gitops})
	if err != nil {
		t.Fatalf("embedded run: %v", err)
	}
	if want := (pipelines.Results{PreviousImage: v1, Commit: seed.Hash.String()}); !cmp.Equal(res, want) {
		t.Errorf("embedded run results %+v, want %+v: the same image, unchanged", res, want)
	}
	canaryPhase(ctx, t, target, ns, "web", flaggerv1.CanaryPhaseInitialized)

	// Tekton rolls out v2, GitOps first.
	tekton, err := tektonrun.New(tk.Config, pns, clusters, tektonrun.WithLabels(map[string]string{fleettest.HostStepsLabel: fleettest.HostStepsValue}))
	if err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "web-settings"}, "data": map[string]any{"mode": "canary"},
	}}
	p := pipelines.RunParams{
		Rollout: "r1", Application: "web", Namespace: ns, Workload: "web", Image: v2, Canary: blueGreen("web"),
		Objects: []*unstructured.Unstructured{cm},
		GitOps:  gitops,
	}
	res, err = tekton.Run(ctx, "c2", p)
	if err != nil {
		t.Fatalf("tekton run: %v", err)
	}
	head := gittest.Head(t, repo)
	if want := (pipelines.Results{PreviousImage: v1, Changed: true, Commit: head.Hash.String()}); !cmp.Equal(res, want) {
		t.Errorf("tekton run results %+v, want %+v", res, want)
	}
	if !strings.Contains(head.Message, "flotilla: web sha256:bbbbbbb") || !strings.Contains(head.Message, "(rollout r1)") {
		t.Errorf("commit message %q: want the application, version and rollout", head.Message)
	}
	got, err := target.Kube.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := got.Spec.Template.Spec.Containers[0].Image; img != v2 {
		t.Errorf("deployment image %s, want %s", img, v2)
	}
	if _, err := target.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "web-settings", metav1.GetOptions{}); err != nil {
		t.Errorf("the canary's object was not applied: %v", err)
	}
	runs, err := tk.Tekton.TektonV1().PipelineRuns(pns).List(ctx, metav1.ListOptions{LabelSelector: pipelines.LabelRollout + "=r1"})
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("PipelineRuns of r1: %v, %v", runs, err)
	}
	checkTaskRuns(ctx, t, tk, pns, runs.Items[0], map[string]bool{"bump-image": true, "apply-canary": true})
	for _, prm := range runs.Items[0].Spec.Params { // the kubeconfig travels by Secret reference only
		if tok := target.Config.BearerToken; tok != "" && strings.Contains(prm.Value.StringVal, tok) {
			t.Errorf("param %s carries the target cluster's token", prm.Name)
		}
	}

	c := canaryPhase(ctx, t, target, ns, "web", flaggerv1.CanaryPhaseSucceeded)
	primary, err := target.Kube.AppsV1().Deployments(ns).Get(ctx, "web-primary", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if img := primary.Spec.Template.Spec.Containers[0].Image; img != v2 {
		t.Errorf("Flagger promoted %s, want %s (canary %+v)", img, v2, c.Status)
	}

	// A run the task refuses fails permanently, its reason carried back.
	_, err = tekton.Run(ctx, "c2", pipelines.RunParams{Rollout: "r2", Namespace: ns, Workload: "missing", Image: v2, Canary: blueGreen("missing")})
	if !fault.IsPermanent(err) || !strings.Contains(err.Error(), "deployment "+ns+"/missing not found") {
		t.Errorf("run for a missing workload: %v, want a permanent error saying it is not found", err)
	}
}

// checkTaskRuns checks which pipeline tasks of pr ran and succeeded.
func checkTaskRuns(ctx context.Context, t *testing.T, cl *fleettest.Clients, ns string, pr tektonv1.PipelineRun, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for _, ref := range pr.Status.ChildReferences {
		tr, err := cl.Tekton.TektonV1().TaskRuns(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got[ref.PipelineTaskName] = tr.Status.GetCondition(apis.ConditionSucceeded).IsTrue()
	}
	for task, ok := range want {
		if got[task] != ok {
			t.Errorf("TaskRun of %s succeeded: %t, want %t (all: %v)", task, got[task], ok, got)
		}
	}
}

// The embedded executor runs a release set of image members through the
// pipeline's apply-canary (its members param): the api, then the
// frontend, each set to its image (the frontend's in its second
// container) and promoted, the lead's canary listing both. Catches: the
// members lost between the run's params and the task (only the lead's
// workload set), the frontend's image put in its first container.
func TestEmbeddedRunsAnImageSet(t *testing.T) {
	_, target := fleetClients(t)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	ns := target.Namespace(ctx, t, "web")
	fe := deployment("web-frontend", "registry.example.com/web-frontend:1")
	fe.Spec.Template.Spec.Containers = append([]corev1.Container{{Name: "side", Image: "registry.example.com/side:1"}}, fe.Spec.Template.Spec.Containers...)
	for _, d := range []*appsv1.Deployment{deployment("web-api", "registry.example.com/web-api:1"), fe} {
		if _, err := target.Kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	api2 := "registry.example.com/web-api@sha256:" + strings.Repeat("a", 64)
	fe2 := "registry.example.com/web-frontend@sha256:" + strings.Repeat("f", 64)
	members := []tasks.SetMember{
		{Application: "web-api", Kind: "Deployment", Workload: "web-api", Image: api2, Canary: blueGreen("web-api")},
		{Application: "web-frontend", Kind: "Deployment", Workload: "web-frontend", Container: "web-frontend", Image: fe2, Canary: blueGreen("web-frontend")},
	}
	res, err := embedded.New(clusterSet{"c2": target.Config}).Run(ctx, "c2", pipelines.RunParams{
		Rollout: "r1", Namespace: ns, Workload: "web-api", Image: "sha256:" + strings.Repeat("0", 64), Canary: members[0].Canary, Members: members, Timeout: 3 * time.Minute,
	})
	if err != nil {
		t.Fatalf("embedded run of the set: %v", err)
	}
	// What each member ran before comes back through the pipeline's
	// results: the cluster's previous version.
	wantPrev := map[string]string{"web-api": "registry.example.com/web-api:1", "web-frontend": "registry.example.com/web-frontend:1"}
	if d := cmp.Diff(wantPrev, res.PreviousMembers); d != "" {
		t.Errorf("the run's previous members (-want +got):\n%s", d)
	}
	got := map[string]string{}
	for _, name := range []string{"web-api", "web-api-primary", "web-frontend", "web-frontend-primary"} {
		d, err := target.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			got[name+"/"+c.Name] = c.Image
		}
	}
	want := map[string]string{
		"web-api/web-api": api2, "web-api-primary/web-api": api2,
		"web-frontend/side": "registry.example.com/side:1", "web-frontend/web-frontend": fe2,
		"web-frontend-primary/side": "registry.example.com/side:1", "web-frontend-primary/web-frontend": fe2,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("images after the set's run (-want +got):\n%s", d)
	}
	lead, err := target.Flagger.FlaggerV1beta1().Canaries(ns).Get(ctx, "web-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := lead.Annotations[canary.AnnotationWorkloads]; got != "web-api,web-frontend" {
		t.Errorf("the lead's canary lists %q, want web-api,web-frontend", got)
	}
}
