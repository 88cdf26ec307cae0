package canary

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// DefaultCPUUtilization is the average CPU utilization, in percent of the
// pods' requests, the autoscaler keeps: the API's own default, written out.
const DefaultCPUUtilization = 80

// autoscaler renders Kurator's autoScale: a HorizontalPodAutoscaler for the
// workload (a Deployment), named after it. Flagger copies it for the
// primary and points this one at the canary.
func autoscaler(app config.Application) *autoscalingv2.HorizontalPodAutoscaler {
	as := app.Delivery.Autoscale
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta: metav1.TypeMeta{APIVersion: autoscalingv2.SchemeGroupVersion.String(), Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      app.Workload.Name,
			Namespace: app.Namespace,
			Labels:    Labels(app.Name),
		},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: app.Workload.Kind, Name: app.Workload.Name},
			MinReplicas:    ptr.To(as.MinReplicas),
			MaxReplicas:    as.MaxReplicas,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(DefaultCPUUtilization))},
				},
			}},
		},
	}
}
