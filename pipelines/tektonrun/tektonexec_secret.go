package tektonrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-cd/flotilla/pipelines"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeconfigKey is the key of a kubeconfig Secret that holds the kubeconfig.
const KubeconfigKey = "kubeconfig"

// Kubeconfig renders cfg as a self-contained kubeconfig (kube.Kubeconfig);
// a config that authenticates through a credential plugin, which cannot
// run in a pipeline's pod, is a permanent error.
func Kubeconfig(cfg *rest.Config) ([]byte, error) {
	b, err := kube.Kubeconfig(cfg)
	if errors.Is(err, kube.ErrCredentialPlugin) {
		return nil, fault.Permanent(fmt.Errorf("%w: give the cluster a token or client certificate, a pipeline's pod cannot run the plugin", err))
	}
	return b, err
}

// ApplyKubeconfigSecret creates or updates, with server-side apply, the
// Secret namespace/name holding cfg as a kubeconfig (key KubeconfigKey),
// labelled with the cluster's name. The pipelines mount it; its content
// never appears in a PipelineRun.
func ApplyKubeconfigSecret(ctx context.Context, kube kubernetes.Interface, namespace, name, cluster string, cfg *rest.Config) error {
	b, err := Kubeconfig(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig of cluster %s: %w", cluster, err)
	}
	s := corev1ac.Secret(name, namespace).
		WithLabels(map[string]string{pipelines.LabelCluster: pipelines.LabelValue(cluster), "app.kubernetes.io/managed-by": "flotilla"}).
		WithType("Opaque").
		WithData(map[string][]byte{KubeconfigKey: b})
	if _, err := kube.CoreV1().Secrets(namespace).Apply(ctx, s, metav1.ApplyOptions{FieldManager: "flotilla", Force: true}); err != nil {
		return fmt.Errorf("applying the kubeconfig Secret %s/%s of cluster %s: %w", namespace, name, cluster, err)
	}
	return nil
}
