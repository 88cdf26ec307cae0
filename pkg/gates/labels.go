package gates

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Configs gives the client configuration of a cluster (pkg/cluster.Set).
type Configs interface {
	Config(name string) (*rest.Config, error)
}

// KubeLabels reads labels from the clusters' API servers.
type KubeLabels struct {
	configs Configs
	mu      sync.Mutex
	clients map[string]kubernetes.Interface
}

// NewKubeLabels returns a Labels reading the clusters of configs.
func NewKubeLabels(configs Configs) *KubeLabels {
	return &KubeLabels{configs: configs, clients: map[string]kubernetes.Interface{}}
}

var _ Labels = (*KubeLabels)(nil)

// Workload implements [Labels]: the workload's labels and those of the
// pods its selector matches (Flagger's canary pods: the primary is another
// workload, <name>-primary).
func (k *KubeLabels) Workload(ctx context.Context, cluster, namespace, kind, name string) (map[string]string, []map[string]string, error) {
	c, err := k.client(cluster)
	if err != nil {
		return nil, nil, err
	}
	var (
		labels   map[string]string
		selector *metav1.LabelSelector
	)
	switch kind {
	case "", "Deployment":
		d, err := c.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("getting deployment: %w", err)
		}
		labels, selector = d.Labels, d.Spec.Selector
	case "DaemonSet":
		d, err := c.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("getting daemonset: %w", err)
		}
		labels, selector = d.Labels, d.Spec.Selector
	default:
		return nil, nil, fmt.Errorf("label watch cannot read a %s", kind)
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, nil, fmt.Errorf("%s selector: %w", kind, err)
	}
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	podLabels := make([]map[string]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		podLabels = append(podLabels, p.Labels)
	}
	return labels, podLabels, nil
}

func (k *KubeLabels) client(cluster string) (kubernetes.Interface, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if c, ok := k.clients[cluster]; ok {
		return c, nil
	}
	cfg, err := k.configs.Config(cluster)
	if err != nil {
		return nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("client for cluster %s: %w", cluster, err)
	}
	k.clients[cluster] = c
	return c, nil
}
