package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadLabels reads what label watch looks at (pkg/gates.Labels): the
// labels of workload name of kind (Deployment, also when empty, or
// DaemonSet) in namespace of cluster, and those of the pods its selector
// matches (Flagger's canary pods: the primary is another workload,
// <name>-primary).
func (s *Set) WorkloadLabels(ctx context.Context, cluster, namespace, kind, name string) (map[string]string, []map[string]string, error) {
	cs, err := s.clientsFor(cluster)
	if err != nil {
		return nil, nil, err
	}
	var (
		labels   map[string]string
		selector *metav1.LabelSelector
	)
	switch kind {
	case "", "Deployment":
		d, err := cs.kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("getting deployment: %w", err)
		}
		labels, selector = d.Labels, d.Spec.Selector
	case "DaemonSet":
		d, err := cs.kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
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
	pods, err := cs.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, nil, fmt.Errorf("listing pods: %w", err)
	}
	podLabels := make([]map[string]string, 0, len(pods.Items))
	for _, p := range pods.Items {
		podLabels = append(podLabels, p.Labels)
	}
	return labels, podLabels, nil
}
