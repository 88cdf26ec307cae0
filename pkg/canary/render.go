package canary

import (
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Labels flotilla sets on what it creates.
const (
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	ManagedBy         = "flotilla"
	LabelApplication  = "flotilla.dev/application"
	AnnotationRollout = "flotilla.dev/rollout"
)

// EventHook is flotilla's own per-canary event webhook: Flagger posts every
// event of the canary to URL and merges Metadata into each payload, which is
// how an event finds its cluster and rollout again.
type EventHook struct {
	URL      string
	Metadata map[string]string
}

// Input is what varies per cluster and rollout.
type Input struct {
	Cluster string
	Rollout string
	Event   EventHook
	// SkipAnalysis promotes at once (used to revert without re-running analysis).
	SkipAnalysis bool
}

// Render returns the Canary for app.
func Render(app config.Application, in Input) *flaggerv1.Canary {
	d := app.Delivery
	hooks := make([]flaggerv1.CanaryWebhook, 0, len(d.Webhooks)+1)
	for _, w := range d.Webhooks {
		h := flaggerv1.CanaryWebhook{Type: flaggerv1.HookType(w.Type), Name: w.Name, URL: w.URL}
		if w.Timeout.Duration > 0 {
			h.Timeout = w.Timeout.String()
		}
		// Gates learn which cluster and rollout they are asked about, unless
		// the user set those keys.
		md := map[string]string{"cluster": in.Cluster, "rollout": in.Rollout}
		for k, v := range w.Metadata {
			md[k] = v
		}
		h.Metadata = &md
		hooks = append(hooks, h)
	}
	if in.Event.URL != "" {
		md := make(map[string]string, len(in.Event.Metadata))
		for k, v := range in.Event.Metadata {
			md[k] = v
		}
		hooks = append(hooks, flaggerv1.CanaryWebhook{Type: flaggerv1.EventHook, Name: "flotilla-events", URL: in.Event.URL, Metadata: &md})
	}
	c := &flaggerv1.Canary{
		TypeMeta: metav1.TypeMeta{APIVersion: flaggerv1.SchemeGroupVersion.String(), Kind: flaggerv1.CanaryKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        app.Workload.Name,
			Namespace:   app.Namespace,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelApplication: app.Name},
			Annotations: map[string]string{AnnotationRollout: in.Rollout},
		},
		Spec: flaggerv1.CanarySpec{
			Provider:                "kubernetes",
			TargetRef:               flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: app.Workload.Kind, Name: app.Workload.Name},
			ProgressDeadlineSeconds: ptr.To(int32(d.ProgressDeadline.Seconds())),
			Service:                 flaggerv1.CanaryService{Port: app.Service.Port},
			SkipAnalysis:            in.SkipAnalysis,
			Analysis: &flaggerv1.CanaryAnalysis{
				Interval:   d.Interval.String(),
				Iterations: d.Iterations,
				Threshold:  d.Threshold,
				Webhooks:   hooks,
			},
		},
	}
	return c
}
