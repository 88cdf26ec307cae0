package tektonrun

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"github.com/google/go-cmp/cmp"
	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonfake "github.com/tektoncd/pipeline/pkg/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"knative.dev/pkg/apis"
	duckv1 "knative.dev/pkg/apis/duck/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

type staticClusters map[string]*rest.Config

func (s staticClusters) Config(name string) (*rest.Config, error) { return s[name], nil }

func testRunParams() pipelines.RunParams {
	return pipelines.RunParams{
		Rollout: "web-0123456789", Application: "web", Namespace: "apps", Workload: "web",
		Image:  "registry.example.com/web@sha256:" + strings.Repeat("a", 64),
		Canary: &flaggerv1.Canary{ObjectMeta: metav1.ObjectMeta{Name: "web"}},
	}
}

func newFakeTekton(t *testing.T, objs ...runtime.Object) (*Executor, *tektonfake.Clientset, *kubefake.Clientset) {
	t.Helper()
	tc := tektonfake.NewSimpleClientset(objs...)
	kc := kubefake.NewClientset()
	cl := staticClusters{"c1": {Host: "https://c1.example.com:6443", BearerToken: "s3cret", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}}
	return newExecutor(tc, kc, "flotilla", cl, WithLabels(map[string]string{"team": "a"})), tc, kc
}

func done(pr *tektonv1.PipelineRun, ok bool, reason string, results map[string]string) *tektonv1.PipelineRun {
	pr = pr.DeepCopy()
	status := corev1.ConditionTrue
	if !ok {
		status = corev1.ConditionFalse
	}
	pr.Status.Conditions = duckv1.Conditions{{Type: apis.ConditionSucceeded, Status: status, Reason: reason, Message: "the message"}}
	for k, v := range results {
		pr.Status.Results = append(pr.Status.Results, tektonv1.PipelineRunResult{Name: k, Value: *tektonv1.NewStructuredValues(v)})
	}
	return pr
}

// finishWhenCreated plays Tekton's controller: it ends the first
// PipelineRun created, through the API, so the executor's watch sees it. It
// writes the status again every few milliseconds until the test ends: the
// fake clientset's watch does not replay what happened between the
// executor's list and its watch.
func finishWhenCreated(t *testing.T, tc *tektonfake.Clientset, ok bool, results map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	w, err := tc.TektonV1().PipelineRuns("flotilla").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(stopped)
		defer w.Stop()
		var pr *tektonv1.PipelineRun
		for ev := range w.ResultChan() {
			if created, isPR := ev.Object.(*tektonv1.PipelineRun); isPR && ev.Type == watch.Added {
				pr = done(created, ok, "Succeeded", results)
				break
			}
		}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for pr != nil {
			_, _ = tc.TektonV1().PipelineRuns("flotilla").UpdateStatus(ctx, pr, metav1.UpdateOptions{})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

func TestTektonRunCreatesAndFollowsAPipelineRun(t *testing.T) {
	ex, tc, kc := newFakeTekton(t)
	finishWhenCreated(t, tc, true, map[string]string{"previous-image": "web:1", "changed": "true"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := testRunParams()
	res, err := ex.Run(ctx, "c1", p)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if diff := cmp.Diff(pipelines.Results{PreviousImage: "web:1", Changed: true}, res); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	runs, err := tc.TektonV1().PipelineRuns("flotilla").List(ctx, metav1.ListOptions{})
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	pr := runs.Items[0]
	if pr.Name != pipelines.RunName(p.Rollout, "c1", p.Image) || pr.Spec.PipelineRef.Name != pipelines.PipelineName {
		t.Errorf("run %s of %v", pr.Name, pr.Spec.PipelineRef)
	}
	wantLabels := map[string]string{
		"team": "a", pipelines.LabelRollout: "web-0123456789", pipelines.LabelCluster: "c1", pipelines.LabelApplication: "web", "app.kubernetes.io/managed-by": "flotilla",
	}
	if diff := cmp.Diff(wantLabels, pr.Labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	params := map[string]string{}
	for _, prm := range pr.Spec.Params {
		params[prm.Name] = prm.Value.StringVal
	}
	if params[pipelines.ParamKubeconfigSecret] != "flotilla-kubeconfig-c1" || params[tasks.ParamImage] != p.Image || params[pipelines.ParamGitOps] != "false" ||
		!strings.Contains(params[tasks.ParamCanary], `"name":"web"`) {
		t.Errorf("params: %v", params)
	}
	for k, v := range params {
		if strings.Contains(v, "s3cret") {
			t.Errorf("param %s carries the cluster's token", k)
		}
	}
	s, err := kc.CoreV1().Secrets("flotilla").Get(ctx, "flotilla-kubeconfig-c1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("kubeconfig secret: %v", err)
	}
	if kcfg := string(s.Data[KubeconfigKey]); !strings.Contains(kcfg, "https://c1.example.com:6443") || !strings.Contains(kcfg, "s3cret") {
		t.Errorf("kubeconfig secret holds:\n%s", kcfg)
	}
}

// TestTektonObserveEndsTheWait: the watch never reports the run's end (as
// when it lags or broke), but the CloudEvent does.
func TestTektonObserveEndsTheWait(t *testing.T) {
	ex, tc, _ := newFakeTekton(t)
	silent := watch.NewFake()
	// The watch starts after the executor's initial list: once it is asked
	// for, a status change can reach the executor only as an event.
	watching := make(chan struct{})
	var once sync.Once
	tc.PrependWatchReactor("pipelineruns", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return true, silent, nil
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	p := testRunParams()
	type outcome struct {
		res pipelines.Results
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := ex.Run(ctx, "c1", p)
		got <- outcome{res, err}
	}()
	name := pipelines.RunName(p.Rollout, "c1", p.Image)
	var pr *tektonv1.PipelineRun
	for pr == nil {
		var err error
		if pr, err = tc.TektonV1().PipelineRuns("flotilla").Get(ctx, name, metav1.GetOptions{}); err != nil {
			pr = nil
			time.Sleep(10 * time.Millisecond)
		}
	}
	for {
		// Wait until the executor follows the run, then end it and tell.
		ex.mu.Lock()
		following := len(ex.waiters[pr.Namespace+"/"+name]) > 0
		ex.mu.Unlock()
		if following {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatal("the executor never watched the run")
	}
	if _, err := tc.TektonV1().PipelineRuns("flotilla").UpdateStatus(ctx, done(pr, true, "Succeeded", map[string]string{"changed": "false"}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex.Observe(events.PipelineRun{Namespace: "flotilla", Name: "other", Phase: events.PipelineRunSucceeded})
	ex.Observe(events.PipelineRun{Namespace: "flotilla", Name: name, Phase: events.PipelineRunRunning})
	select {
	case o := <-got:
		t.Fatalf("Run ended before the completion event: %+v", o)
	case <-time.After(200 * time.Millisecond):
	}
	ex.Observe(events.PipelineRun{Namespace: "flotilla", Name: name, Phase: events.PipelineRunSucceeded})
	select {
	case o := <-got:
		if o.err != nil || o.res.Changed {
			t.Errorf("Run = %+v, %v", o.res, o.err)
		}
	case <-ctx.Done():
		t.Fatal("the completion event did not end the wait")
	}
}

// TestTektonPodTemplate: the PipelineRun created carries the pod template
// as its TaskRuns' (spec.taskRunTemplate.podTemplate), a copy of it; none
// leaves Tekton's default.
func TestTektonPodTemplate(t *testing.T) {
	const tmplYAML = `
nodeSelector: {node-pool: ci}
tolerations: [{key: dedicated, operator: Equal, value: ci, effect: NoSchedule}]
securityContext: {runAsNonRoot: true, runAsUser: 65532}
imagePullSecrets: [{name: regcred}]
`
	parse := func(t *testing.T) *pod.Template {
		t.Helper()
		var tmpl pod.Template
		if err := yaml.UnmarshalStrict([]byte(tmplYAML), &tmpl); err != nil {
			t.Fatal(err)
		}
		return &tmpl
	}
	for _, tt := range []struct {
		name string
		opts func(tmpl *pod.Template) []Option // tmpl is tmplYAML's
		want tektonv1.PipelineTaskRunTemplate
	}{{
		name: "pod template",
		opts: func(tmpl *pod.Template) []Option { return []Option{WithPodTemplate(tmpl)} },
		want: tektonv1.PipelineTaskRunTemplate{PodTemplate: parse(t)},
	}, {
		name: "pod template and service account",
		opts: func(tmpl *pod.Template) []Option {
			return []Option{WithServiceAccount("flotilla-steps"), WithPodTemplate(tmpl)}
		},
		want: tektonv1.PipelineTaskRunTemplate{PodTemplate: parse(t), ServiceAccountName: "flotilla-steps"},
	}, {
		name: "nil",
		opts: func(*pod.Template) []Option { return []Option{WithPodTemplate(nil)} },
	}, {
		name: "none",
		opts: func(*pod.Template) []Option { return nil },
	}} {
		t.Run(tt.name, func(t *testing.T) {
			tmpl := parse(t)
			tc := tektonfake.NewSimpleClientset()
			ex := newExecutor(tc, kubefake.NewClientset(), "flotilla", staticClusters{}, tt.opts(tmpl)...)
			tmpl.NodeSelector["node-pool"] = "changed after" // the executor keeps its own copy
			p := testRunParams()
			if _, err := ex.start(t.Context(), ex.pipelineRun("c1", p, map[string]string{}, time.Minute)); err != nil {
				t.Fatalf("start: %v", err)
			}
			pr, err := tc.TektonV1().PipelineRuns("flotilla").Get(t.Context(), pipelines.RunName(p.Rollout, "c1", p.Image), metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, pr.Spec.TaskRunTemplate); diff != "" {
				t.Errorf("taskRunTemplate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTektonAdoptsOrReplacesAnEarlierRun(t *testing.T) {
	p := testRunParams()
	name := pipelines.RunName(p.Rollout, "c1", p.Image)
	base := &tektonv1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "flotilla"}}
	t.Run("succeeded run is adopted", func(t *testing.T) {
		ex, tc, _ := newFakeTekton(t, done(base, true, "Succeeded", map[string]string{"previous-image": "web:0", "changed": "true"}))
		res, err := ex.Run(t.Context(), "c1", p)
		if err != nil || res.PreviousImage != "web:0" {
			t.Fatalf("Run = %+v, %v; want the earlier run's results", res, err)
		}
		if runs, _ := tc.TektonV1().PipelineRuns("flotilla").List(t.Context(), metav1.ListOptions{}); len(runs.Items) != 1 {
			t.Errorf("%d runs, want the earlier one only", len(runs.Items))
		}
	})
	t.Run("failed run is replaced", func(t *testing.T) {
		ex, tc, _ := newFakeTekton(t, done(base, false, "Failed", nil))
		finishWhenCreated(t, tc, true, map[string]string{"changed": "true"})
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if _, err := ex.Run(ctx, "c1", p); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if _, err := tc.TektonV1().PipelineRuns("flotilla").Get(ctx, name+"-2", metav1.GetOptions{}); err != nil {
			t.Errorf("no second run: %v", err)
		}
	})
}

func TestTektonFailures(t *testing.T) {
	p := testRunParams()
	name := pipelines.RunName(p.Rollout, "c1", p.Image)
	failedTaskRun := func(exit int32) *tektonv1.TaskRun {
		tr := &tektonv1.TaskRun{ObjectMeta: metav1.ObjectMeta{Name: name + "-apply-canary", Namespace: "flotilla"}}
		tr.Status.Conditions = duckv1.Conditions{{Type: apis.ConditionSucceeded, Status: corev1.ConditionFalse, Reason: "Failed"}}
		tr.Status.Results = []tektonv1.TaskRunResult{{Name: tasks.ResultError, Value: *tektonv1.NewStructuredValues("deployment apps/web not found")}}
		tr.Status.Steps = []tektonv1.StepState{{Name: "apply-canary", ContainerState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit}}}}
		return tr
	}
	for _, tt := range []struct {
		name          string
		reason        string
		taskRun       *tektonv1.TaskRun
		wantPermanent bool
		wantMsg       string
	}{
		{"step failed permanently", "Failed", failedTaskRun(tasks.ExitPermanent), true, "task apply-canary: deployment apps/web not found"},
		{"step failed", "Failed", failedTaskRun(1), false, "deployment apps/web not found"},
		{"pipeline missing", "CouldntGetPipeline", nil, true, "CouldntGetPipeline: the message"},
		{"timed out", "PipelineRunTimeout", nil, false, "PipelineRunTimeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ex, tc, _ := newFakeTekton(t)
			if tt.taskRun != nil {
				if _, err := tc.TektonV1().TaskRuns("flotilla").Create(t.Context(), tt.taskRun, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			pr := done(&tektonv1.PipelineRun{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "flotilla"}}, false, tt.reason, nil)
			if tt.taskRun != nil {
				pr.Status.ChildReferences = []tektonv1.ChildStatusReference{{
					TypeMeta: runtime.TypeMeta{Kind: "TaskRun"}, Name: tt.taskRun.Name, PipelineTaskName: "apply-canary",
				}}
			}
			err := ex.failure(t.Context(), pr)
			if fault.IsPermanent(err) != tt.wantPermanent || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("failure = %v (permanent %t), want permanent %t saying %q", err, fault.IsPermanent(err), tt.wantPermanent, tt.wantMsg)
			}
		})
	}
}

func TestKubeconfigRefusesPlugins(t *testing.T) {
	_, err := Kubeconfig(&rest.Config{Host: "https://x", ExecProvider: &clientcmdapi.ExecConfig{Command: "gke-gcloud-auth-plugin"}})
	if !fault.IsPermanent(err) {
		t.Errorf("Kubeconfig = %v, want a permanent error", err)
	}
}

func TestRunNames(t *testing.T) {
	long := strings.Repeat("application-", 6) + "0123456789"
	for _, tt := range []struct{ rollout, cluster string }{
		{"web-0123456789", "c1"}, {long, "Prod_EU.1"}, {"", ""},
	} {
		n := pipelines.RunName(tt.rollout, tt.cluster, "img")
		if len(n) > 50 || n != pipelines.DNSLabel(n) {
			t.Errorf("RunName(%q, %q) = %q: want a DNS label of at most 50 characters", tt.rollout, tt.cluster, n)
		}
		if n == pipelines.RunName(tt.rollout, tt.cluster, "img2") {
			t.Errorf("runName ignores the image")
		}
		if v := pipelines.LabelValue(tt.rollout + tt.rollout); len(v) > 63 {
			t.Errorf("labelValue too long: %q", v)
		}
	}
}
