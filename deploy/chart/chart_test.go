package chart

import (
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pkg/render"
)

// renderChart is `helm template flotilla flotilla -n flotilla [-f file]`.
func renderChart(t *testing.T, file string) map[string]*unstructured.Unstructured {
	t.Helper()
	out := map[string]*unstructured.Unstructured{}
	for _, o := range renderIn(t, file, "flotilla") {
		out[o.GetKind()+"/"+o.GetName()] = o
	}
	return out
}

// renderIn is `helm template flotilla flotilla -n namespace [-f file]`, in order.
func renderIn(t *testing.T, file, namespace string) []*unstructured.Unstructured {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render.Render(render.Request{Kind: render.Helm, Dir: dir, Chart: &render.Chart{
		Dir: "flotilla", ValuesFile: file, ReleaseName: "flotilla", Namespace: namespace,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func keys(m map[string]*unstructured.Unstructured) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The objects each rendering holds.
func TestRenderings(t *testing.T) {
	// The chart's crds/: not templated (no labels), cluster-scoped.
	const crd, appCRD, clusterCRD, policyCRD = "CustomResourceDefinition/fleetrollouts.flotilla.dev", "CustomResourceDefinition/applications.flotilla.dev", "CustomResourceDefinition/clusters.flotilla.dev", "CustomResourceDefinition/wavepolicies.flotilla.dev"
	for _, tc := range []struct {
		file string
		want []string
	}{
		{"testdata/values-minimal.yaml", []string{"ConfigMap/flotilla-config", appCRD, clusterCRD, crd, policyCRD, "Deployment/flotilla", "PersistentVolumeClaim/flotilla-data", "Secret/flotilla-api-token", "Secret/flotilla-secrets", "Service/flotilla", "ServiceAccount/flotilla"}},
		{"testdata/values-all.yaml", []string{"ConfigMap/flotilla-config", "ConfigMap/flotilla-dashboard", appCRD, clusterCRD, crd, policyCRD, "Deployment/flotilla", "HTTPRoute/flotilla", "HTTPRoute/flotilla-ui", "Ingress/flotilla", "Ingress/flotilla-ui", "NetworkPolicy/flotilla",
			"PersistentVolumeClaim/flotilla-data", "PrometheusRule/flotilla", "Secret/flotilla-api-token", "Secret/flotilla-secrets", "Service/flotilla", "ServiceAccount/flotilla", "ServiceMonitor/flotilla"}},
		{"testdata/values-scaleout.yaml", []string{"ConfigMap/flotilla-config", appCRD, clusterCRD, crd, policyCRD, "Deployment/flotilla", "PodDisruptionBudget/flotilla", "Role/flotilla-fleetrollouts", "RoleBinding/flotilla-fleetrollouts",
			"Secret/flotilla-api-token", "Secret/flotilla-secrets", "Service/flotilla", "ServiceAccount/flotilla"}},
	} {
		objs := renderChart(t, tc.file)
		if diff := cmp.Diff(tc.want, keys(objs)); diff != "" {
			t.Errorf("values %q: objects (-want +got)\n%s", tc.file, diff)
		}
		for k, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				continue
			}
			l := o.GetLabels()
			if l["helm.sh/chart"] != "flotilla-0.1.0" || l["app.kubernetes.io/name"] != "flotilla" || o.GetNamespace() != "flotilla" {
				t.Errorf("%s: labels %v, namespace %q", k, l, o.GetNamespace())
			}
		}
	}
}

// The Deployment: one replica replaced (the embedded store is one
// process's), probes, the image by digest when one is given, the init
// container checking the config, the volumes mounted.
func TestDeployment(t *testing.T) {
	d := renderChart(t, "testdata/values-all.yaml")["Deployment/flotilla"]
	str := func(fields ...string) string {
		s, _, _ := unstructured.NestedString(d.Object, fields...)
		return s
	}
	if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 1 || str("spec", "strategy", "type") != "Recreate" {
		t.Errorf("replicas %d, strategy %q; want 1, Recreate", r, str("spec", "strategy", "type"))
	}
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	if pod["automountServiceAccountToken"] != false {
		t.Errorf("automountServiceAccountToken %v, want false", pod["automountServiceAccountToken"])
	}
	containers, _ := pod["containers"].([]any)
	inits, _ := pod["initContainers"].([]any)
	if len(containers) != 1 || len(inits) != 1 {
		t.Fatalf("%d containers, %d init containers; want 1 and 1", len(containers), len(inits))
	}
	c, _ := containers[0].(map[string]any)
	ic, _ := inits[0].(map[string]any)
	wantImage := "ghcr.io/flotilla-cd/flotilla@sha256:0a72042d5adc5d61dd8ee65d856ac75996bbeddc47b588ad7142fcb77ca242ee"
	if c["image"] != wantImage || ic["image"] != wantImage {
		t.Errorf("images %v, %v; want %s", c["image"], ic["image"], wantImage)
	}
	wantArgs := []any{"serve", "--config=/etc/flotilla/config/config.yaml", "--listen=0.0.0.0:8080", "--data-dir=/var/lib/flotilla/data", "--log-level=info"}
	if diff := cmp.Diff(wantArgs, c["args"]); diff != "" {
		t.Errorf("args (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]any{"config", "check", "--config", "/etc/flotilla/config/config.yaml"}, ic["args"]); diff != "" {
		t.Errorf("init args (-want +got)\n%s", diff)
	}
	for probe, path := range map[string]string{"startupProbe": "/healthz", "livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if got, _, _ := unstructured.NestedString(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %q, want %s", probe, got, path)
		}
	}
	// The config check reads the same files as flotilla.
	want := []string{"/etc/flotilla/config", "/etc/flotilla/secrets", "/etc/flotilla/kubeconfigs", "/etc/flotilla/api-token", "/etc/flotilla/registries/regcred", "/etc/flotilla/registries/ghcr-creds", "/var/lib/flotilla", "/tmp", "/etc/flotilla/git-ssh"}
	for _, cc := range []map[string]any{c, ic} {
		var mounts []string
		for _, m := range cc["volumeMounts"].([]any) {
			mm, _ := m.(map[string]any)
			mounts = append(mounts, mm["mountPath"].(string))
		}
		if diff := cmp.Diff(want, mounts); diff != "" {
			t.Errorf("container %s: mounts (-want +got)\n%s", cc["name"], diff)
		}
	}
	// The pod restarts when its config or secrets change.
	ann, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations")
	for _, k := range []string{"checksum/config", "checksum/secrets"} {
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(ann[k]) {
			t.Errorf("pod annotation %s = %q, want a sha256", k, ann[k])
		}
	}
	if ann["example.com/team"] != "platform" {
		t.Errorf("pod annotations %v: want podAnnotations' too", ann)
	}
}
