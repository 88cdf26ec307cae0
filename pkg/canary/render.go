package canary

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// AnnotationRollout names the rollout that last applied the canary.
const AnnotationRollout = "flotilla.dev/rollout"

// AnnotationRevision, on the pod template of a git application's workload,
// names what it runs: "<repository>@<commit>". Flagger copies it to the
// primary, so it says which commit the primary was promoted to; flotilla
// reads it where it reads an image application's container image.
const AnnotationRevision = "flotilla.dev/revision"

// EventHook is flotilla's own per-canary event webhook: Flagger posts every
// event of the canary to URL and merges Metadata into each payload, which is
// how an event finds its cluster and rollout again.
type EventHook struct {
	URL      string
	Metadata map[string]string
}

// Input is what varies per cluster and rollout.
type Input struct {
	// Instance is the flotilla rendering (config server.instance); it
	// labels every object. Empty leaves the label out.
	Instance string
	Cluster  string
	Rollout  string
	Event    EventHook
	// SkipAnalysis promotes at once (used to revert without re-running analysis).
	SkipAnalysis bool
}

// Objects is everything flotilla creates for one application in one cluster.
type Objects struct {
	// Canary is Flagger's canary for the workload.
	Canary *flaggerv1.Canary
	// MetricTemplates hold the policy's custom metrics, one each.
	MetricTemplates []*flaggerv1.MetricTemplate
	// Autoscaler scales the workload, when the policy autoscales; Flagger
	// copies it for the primary.
	Autoscaler *autoscalingv2.HorizontalPodAutoscaler
	// LoadTester is Flagger's load tester, when the policy sets testLoader.
	LoadTester *LoadTester
}

// LoadTester is Flagger's load tester, which runs the policy's load test
// commands.
type LoadTester struct {
	Deployment *appsv1.Deployment
	Service    *corev1.Service
}

// Render returns the objects that run app's delivery policy in one cluster.
// app must be valid, as config.Load returns it; Render shares no maps or
// slices with app or in.
func Render(app config.Application, in Input) Objects {
	o := Objects{MetricTemplates: metricTemplates(app)}
	if app.Delivery.Autoscale != nil {
		o.Autoscaler = autoscaler(app)
	}
	if app.Delivery.TestLoader {
		o.LoadTester = loadTester(app)
	}
	o.Canary = renderCanary(app, in, o)
	if in.Instance != "" {
		for _, obj := range o.List() {
			if m, err := meta.Accessor(obj); err == nil {
				m.GetLabels()[LabelInstance] = in.Instance
			}
		}
	}
	return o
}

// List returns every object in the order to apply them: what the canary
// refers to first (Dependencies), the canary last.
func (o Objects) List() []runtime.Object {
	objs := o.dependencies()
	if o.Canary != nil {
		objs = append(objs, o.Canary)
	}
	return objs
}

func (o Objects) dependencies() []runtime.Object {
	var objs []runtime.Object
	if o.LoadTester != nil {
		objs = append(objs, o.LoadTester.Service, o.LoadTester.Deployment)
	}
	for _, mt := range o.MetricTemplates {
		objs = append(objs, mt)
	}
	if o.Autoscaler != nil {
		objs = append(objs, o.Autoscaler)
	}
	return objs
}

// Unstructured returns List's objects as they are applied: without status,
// and without the null fields Go's types write for unset ones.
func (o Objects) Unstructured() ([]*unstructured.Unstructured, error) {
	return toUnstructured(o.List())
}

// Dependencies returns the objects the canary refers to, as Unstructured
// does, in the order to apply them before the canary.
func (o Objects) Dependencies() ([]*unstructured.Unstructured, error) {
	return toUnstructured(o.dependencies())
}

func toUnstructured(objs []runtime.Object) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		u, err := Unstructured(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// Unstructured returns obj as it is applied: without status, and without
// the null fields Go's types write for unset ones, which an API server may
// refuse (Flagger's CRD refuses autoscalerRef.primaryScalerQueries: null).
func Unstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("converting %T: %w", obj, err)
	}
	delete(m, "status")
	pruneNulls(m)
	return &unstructured.Unstructured{Object: m}, nil
}

// pruneNulls removes null values, such as the creationTimestamp of objects
// never stored, from m and the maps nested in it.
func pruneNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			pruneNulls(v)
		case []any:
			for _, e := range v {
				if em, ok := e.(map[string]any); ok {
					pruneNulls(em)
				}
			}
		}
	}
}

// duration writes d as Flagger's CRD accepts durations (the pattern
// ^[0-9]+(m|s)): minutes and seconds, or milliseconds for fractions of a
// second.
func duration(d time.Duration) string {
	if d%time.Second != 0 {
		return fmt.Sprintf("%dms", (d+time.Millisecond-1)/time.Millisecond)
	}
	m, s := d/time.Minute, d%time.Minute/time.Second
	switch {
	case m == 0:
		return fmt.Sprintf("%ds", s)
	case s == 0:
		return fmt.Sprintf("%dm", m)
	default:
		return fmt.Sprintf("%dm%ds", m, s)
	}
}
