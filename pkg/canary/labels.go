package canary

import (
	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Labels flotilla sets on what it creates.
const (
	LabelManagedBy   = "app.kubernetes.io/managed-by"
	ManagedBy        = "flotilla"
	LabelApplication = "flotilla.dev/application"
	// LabelInstance names the flotilla (config server.instance) that
	// created an object: one flotilla never prunes another's objects.
	LabelInstance = "flotilla.dev/instance"
)

// Labels returns the labels that mark an object as flotilla's, created for
// the application.
func Labels(application string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelApplication: application}
}

// Selector selects every object flotilla created for the application, in
// each of OwnedResources: what removing its delivery policy removes.
func Selector(application string) labels.Selector {
	return labels.SelectorFromSet(Labels(application))
}

// OwnedResources lists the resources of the objects Render creates.
var OwnedResources = []schema.GroupVersionResource{
	flaggerv1.SchemeGroupVersion.WithResource("canaries"),
	flaggerv1.SchemeGroupVersion.WithResource("metrictemplates"),
	autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers"),
	appsv1.SchemeGroupVersion.WithResource("deployments"),
	corev1.SchemeGroupVersion.WithResource("services"),
}
