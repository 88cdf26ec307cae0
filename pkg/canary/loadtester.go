package canary

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// LoadTesterImage is Flagger's load tester, the version Flagger
// (localfleet.FlaggerVersion) ships in its kustomize/tester.
const LoadTesterImage = "ghcr.io/fluxcd/flagger-loadtester:0.35.0"

// LoadTesterName names the load tester of an application: one per
// application, so that removing one application's policy leaves the
// others' load testers alone.
func LoadTesterName(application string) string { return config.LoadTesterPrefix + application }

// LoadTesterURL is where the application's load tester listens.
func LoadTesterURL(app config.Application) string {
	return "http://" + LoadTesterName(app.Name) + "." + app.Namespace + "/"
}

// loadTester renders Flagger's load tester as Flagger's kustomize/tester
// installs it, in the application's namespace.
func loadTester(app config.Application) *LoadTester {
	name := LoadTesterName(app.Name)
	selector := map[string]string{"app": name}
	podLabels := Labels(app.Name)
	podLabels["app"] = name
	probe := &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{
			Command: []string{"wget", "--quiet", "--tries=1", "--timeout=4", "--spider", "http://localhost:8080/healthz"},
		}},
		TimeoutSeconds: 5,
	}
	meta := metav1.ObjectMeta{Name: name, Namespace: app.Namespace, Labels: Labels(app.Name)}
	return &LoadTester{
		Deployment: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: selector},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{
						Labels:      podLabels,
						Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
					},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name:            "loadtester",
						Image:           LoadTesterImage,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						Command:         []string{"./loadtester", "-port=8080", "-log-level=info", "-timeout=1h"},
						LivenessProbe:   probe,
						ReadinessProbe:  probe.DeepCopy(),
						Resources: corev1.ResourceRequirements{
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi"), corev1.ResourceCPU: resource.MustParse("1000m")},
							Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("10m")},
						},
						SecurityContext: &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true), RunAsUser: ptr.To(int64(10001))},
					}}},
				},
			},
		},
		Service: &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: *meta.DeepCopy(),
			Spec: corev1.ServiceSpec{
				Type:     corev1.ServiceTypeClusterIP,
				Selector: maps.Clone(selector),
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
			},
		},
	}
}
