package tektonrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pipelines"

	"github.com/tektoncd/pipeline/pkg/apis/pipeline/pod"
	tektonv1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	tektonclient "github.com/tektoncd/pipeline/pkg/client/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"knative.dev/pkg/apis"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/pipelines/tasks"
	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Executor runs the flotilla-rollout Pipeline as PipelineRuns in the cluster
// that runs Tekton. Each target cluster's kubeconfig is in a Secret there
// (see ApplyKubeconfigSecret), which the PipelineRun names and the Task
// mounts; nothing secret is inline. It follows a run to completion by
// watching it, and ends the wait early when Observe sees the run's
// completion in Tekton's CloudEvents.
type Executor struct {
	tekton    tektonclient.Interface
	kube      kubernetes.Interface
	namespace string
	clusters  pipelines.Clusters
	o         options

	mu      sync.Mutex
	waiters map[string][]chan struct{} // by namespace/name of the run
	secrets map[string]bool            // clusters whose Secret is applied
}

type options struct {
	pipeline       string
	serviceAccount string
	labels         map[string]string
	podTemplate    *pod.Template
	secretName     func(cluster string) string
	manageSecrets  bool
	log            *slog.Logger
}

// Option configures the Tekton executor.
type Option func(*options)

// WithPipelineName runs another Pipeline than PipelineName (one with the
// same params and results).
func WithPipelineName(name string) Option {
	return func(o *options) { o.pipeline = name }
}

// WithServiceAccount runs the TaskRuns' pods as this service account.
// Default: Tekton's default, "default".
func WithServiceAccount(name string) Option {
	return func(o *options) { o.serviceAccount = name }
}

// WithLabels adds labels to every PipelineRun (and so to its TaskRuns and
// pods).
func WithLabels(l map[string]string) Option {
	return func(o *options) { o.labels = maps.Clone(l) }
}

// WithPodTemplate sets Tekton's pod template of every PipelineRun's
// TaskRuns (spec.taskRunTemplate.podTemplate): where the steps' pods run
// and how (node selector, tolerations, security context, image pull
// secrets, ...). A copy is kept. Default: none, Tekton's defaults.
func WithPodTemplate(t *pod.Template) Option {
	return func(o *options) { o.podTemplate = t.DeepCopy() }
}

// WithSecretName names the kubeconfig Secret of each cluster. Default
// DefaultSecretName.
func WithSecretName(f func(cluster string) string) Option {
	return func(o *options) { o.secretName = f }
}

// WithManagedSecrets(false) leaves the kubeconfig Secrets to the operator;
// by default the executor applies each cluster's Secret, from Clusters,
// before the cluster's first run.
func WithManagedSecrets(manage bool) Option {
	return func(o *options) { o.manageSecrets = manage }
}

// WithLogger logs runs created and ended. Default: none.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// DefaultSecretName is the default name of a cluster's kubeconfig Secret.
func DefaultSecretName(cluster string) string {
	return "flotilla-kubeconfig-" + pipelines.DNSLabel(cluster)
}

// NewTekton returns an executor that creates PipelineRuns in namespace of
// the cluster cfg points at; clusters gives the target clusters' configs
// for their kubeconfig Secrets.
func New(cfg *rest.Config, namespace string, clusters pipelines.Clusters, opts ...Option) (*Executor, error) {
	tc, err := tektonclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating tekton client: %w", err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating kubernetes client: %w", err)
	}
	return newExecutor(tc, kc, namespace, clusters, opts...), nil
}

func newExecutor(tc tektonclient.Interface, kc kubernetes.Interface, namespace string, clusters pipelines.Clusters, opts ...Option) *Executor {
	o := options{pipeline: pipelines.PipelineName, secretName: DefaultSecretName, manageSecrets: true, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return &Executor{
		tekton: tc, kube: kc, namespace: namespace, clusters: clusters, o: o,
		waiters: map[string][]chan struct{}{}, secrets: map[string]bool{},
	}
}

// ApplyCanary runs the pipeline without GitOps against cluster.
func (t *Executor) ApplyCanary(ctx context.Context, cluster string, p tasks.ApplyCanaryParams) (tasks.ApplyCanaryResult, error) {
	return pipelines.ApplyCanary(ctx, t.Run, cluster, p)
}

// Run creates a PipelineRun of the pipeline for cluster, or finds the one
// an earlier call created for the same rollout, cluster and image, follows
// it to completion and returns its results.
func (t *Executor) Run(ctx context.Context, cluster string, p pipelines.RunParams) (pipelines.Results, error) {
	params, err := p.PipelineParams()
	if err != nil {
		return pipelines.Results{}, err
	}
	params[pipelines.ParamKubeconfigSecret] = t.o.secretName(cluster)
	if err := t.ensureSecret(ctx, cluster); err != nil {
		return pipelines.Results{}, err
	}
	timeout := p.Timeout
	if timeout == 0 {
		timeout = pipelines.DefaultTimeout
	}
	pr, err := t.start(ctx, t.pipelineRun(cluster, p, params, timeout))
	if err != nil {
		return pipelines.Results{}, err
	}
	t.o.log.InfoContext(ctx, "pipeline run started", "pipelineRun", pr.Name, "namespace", pr.Namespace, "cluster", cluster, "rollout_id", p.Rollout)
	if !pr.IsDone() {
		if pr, err = t.follow(ctx, pr.Namespace, pr.Name); err != nil {
			return pipelines.Results{}, err
		}
	}
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	t.o.log.InfoContext(ctx, "pipeline run ended", "pipelineRun", pr.Name, "cluster", cluster, "rollout_id", p.Rollout,
		"reason", c.GetReason(), "succeeded", c.IsTrue())
	if !c.IsTrue() {
		return pipelines.Results{}, t.failure(ctx, pr)
	}
	m := map[string]string{}
	for _, r := range pr.Status.Results {
		m[r.Name] = r.Value.StringVal
	}
	return pipelines.ResultsFrom(m)
}

func (t *Executor) ensureSecret(ctx context.Context, cluster string) error {
	if !t.o.manageSecrets {
		return nil
	}
	t.mu.Lock()
	done := t.secrets[cluster]
	t.mu.Unlock()
	if done {
		return nil
	}
	cfg, err := t.clusters.Config(cluster)
	if err != nil {
		return err
	}
	if err := ApplyKubeconfigSecret(ctx, t.kube, t.namespace, t.o.secretName(cluster), cluster, cfg); err != nil {
		return err
	}
	t.mu.Lock()
	t.secrets[cluster] = true
	t.mu.Unlock()
	return nil
}

func (t *Executor) pipelineRun(cluster string, p pipelines.RunParams, params map[string]string, timeout time.Duration) *tektonv1.PipelineRun {
	labels := maps.Clone(t.o.labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[pipelines.LabelRollout] = pipelines.LabelValue(p.Rollout)
	labels[pipelines.LabelCluster] = pipelines.LabelValue(cluster)
	if p.Application != "" {
		labels[pipelines.LabelApplication] = pipelines.LabelValue(p.Application)
	}
	labels["app.kubernetes.io/managed-by"] = "flotilla"
	pr := &tektonv1.PipelineRun{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.RunName(cluster), Namespace: t.namespace, Labels: labels,
			Annotations: map[string]string{pipelines.LabelRollout: p.Rollout, pipelines.LabelCluster: cluster, "flotilla.dev/image": p.Image},
		},
		Spec: tektonv1.PipelineRunSpec{
			PipelineRef: &tektonv1.PipelineRef{Name: t.o.pipeline},
			Timeouts:    &tektonv1.TimeoutFields{Pipeline: &metav1.Duration{Duration: timeout}},
		},
	}
	if t.o.serviceAccount != "" {
		pr.Spec.TaskRunTemplate.ServiceAccountName = t.o.serviceAccount
	}
	if t.o.podTemplate != nil {
		pr.Spec.TaskRunTemplate.PodTemplate = t.o.podTemplate.DeepCopy()
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		pr.Spec.Params = append(pr.Spec.Params, tektonv1.Param{Name: k, Value: *tektonv1.NewStructuredValues(params[k])})
	}
	return pr
}

// maxRunAttempts bounds the runs created for one rollout, cluster and
// image: a failed run is kept for inspection and the next call starts a new
// one, named with a suffix.
const maxRunAttempts = 10

// start creates pr, or adopts the run of that name when it exists and is
// under way or succeeded; a failed one leaves its name to a new run, -2,
// -3, ...
func (t *Executor) start(ctx context.Context, pr *tektonv1.PipelineRun) (*tektonv1.PipelineRun, error) {
	base := pr.Name
	for attempt := 1; attempt <= maxRunAttempts; attempt++ {
		if attempt > 1 {
			pr.Name = base + "-" + strconv.Itoa(attempt)
		}
		created, err := t.tekton.TektonV1().PipelineRuns(pr.Namespace).Create(ctx, pr, metav1.CreateOptions{})
		if err == nil {
			return created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) {
				return nil, fault.Permanent(fmt.Errorf("creating PipelineRun %s/%s: %w", pr.Namespace, pr.Name, err))
			}
			return nil, fmt.Errorf("creating PipelineRun %s/%s: %w", pr.Namespace, pr.Name, err)
		}
		old, err := t.tekton.TektonV1().PipelineRuns(pr.Namespace).Get(ctx, pr.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			attempt-- // deleted in between: take the name
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading PipelineRun %s/%s: %w", pr.Namespace, pr.Name, err)
		}
		if !old.IsDone() || old.Status.GetCondition(apis.ConditionSucceeded).IsTrue() {
			return old, nil
		}
	}
	return nil, fault.Permanent(fmt.Errorf("PipelineRun %s/%s failed %d times", pr.Namespace, base, maxRunAttempts))
}

// permanentReasons are the reasons of a failed PipelineRun that another run
// of the same params cannot fix.
var permanentReasons = []tektonv1.PipelineRunReason{
	tektonv1.PipelineRunReasonCouldntGetPipeline, tektonv1.PipelineRunReasonCouldntGetTask,
	tektonv1.PipelineRunReasonFailedValidation, tektonv1.PipelineRunReasonInvalidGraph,
	tektonv1.PipelineRunReasonParameterMissing, tektonv1.PipelineRunReasonParameterTypeMismatch,
	tektonv1.PipelineRunReasonObjectParameterMissKeys, tektonv1.PipelineRunReasonInvalidTaskResultReference,
	tektonv1.PipelineRunReasonInvalidPipelineResultReference, tektonv1.PipelineRunReasonInvalidParamValue,
	tektonv1.PipelineRunReasonInvalidTaskRunSpec, tektonv1.PipelineRunReasonResourceVerificationFailed,
}

// failure describes a failed run: its condition, and the error result and
// exit code of the step that failed. A step that exited
// tasks.ExitPermanent, or a run refused for what it is, is permanent.
func (t *Executor) failure(ctx context.Context, pr *tektonv1.PipelineRun) error {
	c := pr.Status.GetCondition(apis.ConditionSucceeded)
	msg := fmt.Sprintf("PipelineRun %s/%s %s", pr.Namespace, pr.Name, c.GetReason())
	if m := c.GetMessage(); m != "" {
		msg += ": " + m
	}
	permanent := slices.Contains(permanentReasons, tektonv1.PipelineRunReason(c.GetReason()))
	for _, ref := range pr.Status.ChildReferences {
		if ref.Kind != "" && ref.Kind != "TaskRun" {
			continue
		}
		tr, err := t.tekton.TektonV1().TaskRuns(pr.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil || !tr.IsDone() || tr.IsSuccessful() {
			continue
		}
		for _, r := range tr.Status.Results {
			if r.Name == tasks.ResultError && r.Value.StringVal != "" {
				msg += fmt.Sprintf("; task %s: %s", ref.PipelineTaskName, r.Value.StringVal)
			}
		}
		for _, s := range tr.Status.Steps {
			if s.Terminated != nil && s.Terminated.ExitCode == tasks.ExitPermanent {
				permanent = true
			}
		}
	}
	err := errors.New(msg)
	if permanent {
		return fault.Permanent(err)
	}
	return err
}

// Observe takes a PipelineRun event from Tekton's CloudEvents (as the
// tekton receiver journals them): a run that ended wakes whoever follows
// it, who then reads its final status at once instead of waiting for the
// watch. Events of other runs, and duplicates, are harmless.
func (t *Executor) Observe(p events.PipelineRun) {
	if p.Phase != events.PipelineRunSucceeded && p.Phase != events.PipelineRunFailed {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ch := range t.waiters[p.Namespace+"/"+p.Name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (t *Executor) subscribe(key string) chan struct{} {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.waiters[key] = append(t.waiters[key], ch)
	t.mu.Unlock()
	return ch
}

func (t *Executor) unsubscribe(key string, ch chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.waiters[key] = slices.DeleteFunc(t.waiters[key], func(c chan struct{}) bool { return c == ch })
	if len(t.waiters[key]) == 0 {
		delete(t.waiters, key)
	}
}

// follow waits until the run is done: its watch sees it, or an event said
// so and a read confirms it.
func (t *Executor) follow(ctx context.Context, namespace, name string) (*tektonv1.PipelineRun, error) {
	key := namespace + "/" + name
	wake := t.subscribe(key)
	defer t.unsubscribe(key, wake)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type outcome struct {
		pr  *tektonv1.PipelineRun
		err error
	}
	watched := make(chan outcome, 1)
	go func() {
		pr, err := watchPipelineRun(wctx, t.tekton.TektonV1().PipelineRuns(namespace), name,
			func(pr *tektonv1.PipelineRun) bool { return pr.IsDone() })
		watched <- outcome{pr, err}
	}()
	for {
		select {
		case o := <-watched:
			return o.pr, o.err
		case <-wake:
			pr, err := t.tekton.TektonV1().PipelineRuns(namespace).Get(ctx, name, metav1.GetOptions{})
			if err == nil && pr.IsDone() {
				return pr, nil
			}
		}
	}
}
