package charttest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

const (
	// ReleaseName is the Helm release's name.
	ReleaseName = "flotilla"
	// SecretsDir is where the chart mounts its `secrets` value.
	SecretsDir = "/etc/flotilla/secrets/"
	// KubeconfigsDir is where the chart mounts kubeconfigs.existingSecret.
	KubeconfigsDir = "/etc/flotilla/kubeconfigs/"
	// KubeconfigsSecret is the Secret Prepare writes the kubeconfigs to.
	KubeconfigsSecret = "flotilla-kubeconfigs"
)

// Release is flotilla installed by its chart in a namespace of a cluster
// that has a real node.
type Release struct {
	// Namespace is the release's namespace, which Prepare creates.
	Namespace string
	// Kubeconfig is the cluster's admin kubeconfig, for Helm.
	Kubeconfig string
	// Kube is a client of the cluster.
	Kube kubernetes.Interface
	// Node is the real node the pod runs on; its directory holds the
	// release's volume.
	Node *localfleet.RealNode
	// Chart is the chart's directory (deploy/chart/flotilla).
	Chart string
}

// NodeValues are the chart's values that put the pod on a real node: its
// label selected, its taint tolerated.
func NodeValues() map[string]any {
	return map[string]any{
		"nodeSelector": map[string]any{localfleet.RealNodeLabel: "true"},
		"tolerations": []any{map[string]any{
			"key": localfleet.RealNodeTaint, "operator": "Exists", "effect": "NoSchedule",
		}},
	}
}

// Prepare makes what the release expects to find: its namespace, the
// kubeconfigs' Secret (file name -> content) and a PersistentVolume on the
// node (a directory flotilla's user owns) bound in advance to the chart's
// claim.
func (r *Release) Prepare(ctx context.Context, kubeconfigs map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.Namespace}}
	if _, err := r.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", r.Namespace, err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KubeconfigsSecret, Namespace: r.Namespace}, StringData: kubeconfigs}
	if _, err := r.Kube.CoreV1().Secrets(r.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the kubeconfigs' Secret: %w", err)
	}
	dir := filepath.Join(r.Node.Dir, "volumes", r.Namespace)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the volume's directory: %w", err)
	}
	if err := os.Chown(dir, 65532, 65532); err != nil {
		return fmt.Errorf("giving the volume to flotilla's user: %w", err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: r.Namespace},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: r.Namespace, Name: ReleaseName + "-data"},
		},
	}
	if _, err := r.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the PersistentVolume: %w", err)
	}
	return nil
}

// Helm is the Helm SDK's configuration for the release's namespace of the
// cluster, its state in Secrets as the helm CLI keeps it.
func (r *Release) Helm() (*action.Configuration, error) {
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &r.Kubeconfig, &r.Namespace
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, r.Namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm: %w", err)
	}
	return cfg, nil
}

// HelmChart is the Helm configuration and the chart, for an install or an
// upgrade.
func (r *Release) HelmChart() (*action.Configuration, *chart.Chart, error) {
	hc, err := r.Helm()
	if err != nil {
		return nil, nil, err
	}
	ch, err := loader.Load(r.Chart)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the chart: %w", err)
	}
	return hc, ch, nil
}

// HelmValues are values as the helm CLI reads them, from YAML: the chart's
// schema checker knows map[string]any, not map[string]string.
func HelmValues(values map[string]any) (map[string]any, error) {
	b, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("encoding the values: %w", err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decoding the values: %w", err)
	}
	return out, nil
}

// Install runs helm install of the chart with values (as HelmValues makes
// them), waiting up to 2 minutes.
func (r *Release) Install(ctx context.Context, values map[string]any) error {
	hc, ch, err := r.HelmChart()
	if err != nil {
		return err
	}
	install := action.NewInstall(hc)
	install.ReleaseName, install.Namespace, install.Timeout = ReleaseName, r.Namespace, 2*time.Minute
	if _, err := install.RunWithContext(ctx, ch, values); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	return nil
}

// Pod is the release's one pod.
func (r *Release) Pod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := r.Kube.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + ReleaseName})
	if err != nil {
		return nil, fmt.Errorf("listing the release's pods: %w", err)
	}
	if len(pods.Items) != 1 {
		return nil, fmt.Errorf("%d pods of the release, want 1", len(pods.Items))
	}
	return &pods.Items[0], nil
}

// WaitReady waits up to 3 minutes for the pod Ready through its probes; a
// pod whose UID is not (the one an upgrade replaces) is not waited for.
func (r *Release) WaitReady(ctx context.Context, not string) error {
	var last *corev1.Pod
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := r.Pod(ctx)
		if err != nil {
			lastErr = err
			return false, nil
		}
		last = p
		return string(p.UID) != not && p.Status.Phase == corev1.PodRunning && IsReady(p), nil
	})
	if err != nil {
		status := "no pod"
		if last != nil {
			b, _ := yaml.Marshal(last.Status)
			status = string(b)
		}
		return fmt.Errorf("waiting for flotilla's pod Ready: %w (last error %w)\n%s\n--- kubelet:\n%s", err, lastErr, status, r.tail("kubelet", 30))
	}
	return nil
}

// IsReady says whether the pod's Ready condition is true.
func IsReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// tail is the last n lines of the log of the node's process.
func (r *Release) tail(process string, n int) string {
	p, ok := r.Node.Process(process)
	if !ok {
		return ""
	}
	return p.Tail(n)
}

// Uninstall removes the release, its namespace and its volume.
func (r *Release) Uninstall(ctx context.Context) error {
	var errs []error
	if hc, err := r.Helm(); err == nil {
		if _, err := action.NewUninstall(hc).Run(ReleaseName); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, fmt.Errorf("helm uninstall: %w", err))
		}
	}
	if err := r.Kube.CoreV1().Namespaces().Delete(ctx, r.Namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting namespace %s: %w", r.Namespace, err))
	}
	if err := r.Kube.CoreV1().PersistentVolumes().Delete(ctx, r.Namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("deleting the PersistentVolume: %w", err))
	}
	return errors.Join(errs...)
}

// WaitServing polls url up to a minute until it answers 200, on a new
// connection each time (a connection made before kube-proxy's rules for a
// Service would bypass them).
func WaitServing(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		last = fmt.Errorf("answered %d", resp.StatusCode)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %s: %w (last: %w)", url, err, last)
	}
	return nil
}
