package discovery

import (
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// ClusterAPIClusterResource is Cluster API's Cluster, whose metadata alone
// flotilla reads (its name and labels).
var ClusterAPIClusterResource = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta1", Resource: "clusters"}

// Cluster API's kubeconfig Secrets: <cluster>-kubeconfig, of type
// SecretTypeClusterAPI, labelled LabelClusterName with the cluster's name,
// the kubeconfig in data[ClusterAPIKubeconfigKey].
const (
	SecretTypeClusterAPI    = "cluster.x-k8s.io/secret"
	LabelClusterName        = "cluster.x-k8s.io/cluster-name"
	ClusterAPIKubeconfigKey = "value"
)

// ClusterAPI is the inventory of the clusters Cluster API manages: the
// Clusters of the configured namespaces (every namespace when none)
// matching the configured selector, read as metadata with meta, each with
// its kubeconfig Secret, read with kube.
func ClusterAPI(kube kubernetes.Interface, meta metadata.Interface, c config.ClusterAPIDiscovery) (Inventory, error) {
	if _, err := labels.Parse(c.Selector); err != nil {
		return Inventory{}, fmt.Errorf("fleet.discovery.clusterAPI.selector: %w", err)
	}
	namespaces := c.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	inv := Inventory{source: sourceClusterAPI, what: "Cluster API's Clusters and kubeconfig Secrets"}
	if len(c.Namespaces) > 0 {
		inv.what += " in namespaces " + strings.Join(c.Namespaces, ", ")
	}
	var clusters, secrets []cache.SharedIndexInformer
	for _, ns := range namespaces {
		mf := metadatainformer.NewFilteredSharedInformerFactory(meta, 0, ns, func(lo *metav1.ListOptions) { lo.LabelSelector = c.Selector })
		clusters = append(clusters, mf.ForResource(ClusterAPIClusterResource).Informer())
		sf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns),
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
				lo.LabelSelector = LabelClusterName
				lo.FieldSelector = "type=" + SecretTypeClusterAPI
			}))
		inf := sf.Core().V1().Secrets().Informer()
		if err := inf.SetTransform(kubeconfigOnly); err != nil {
			return Inventory{}, fmt.Errorf("fleet.discovery.clusterAPI: %w", err)
		}
		secrets = append(secrets, inf)
	}
	inv.informers = append(clusters, secrets...)
	inv.entries = eachObject(clusters, func(o any) (entry, bool) {
		m, ok := o.(*metav1.PartialObjectMetadata)
		if !ok {
			return entry{}, false
		}
		cl, err := ClusterAPICluster(m, kubeconfigSecret(secrets, m.Namespace, m.Name))
		return entry{key: "Cluster " + m.Namespace + "/" + m.Name, created: m.CreationTimestamp.Time, cluster: cl, err: err}, true
	})
	return inv, nil
}

// kubeconfigOnly keeps the data of the kubeconfig Secrets alone: Cluster
// API's other Secrets of the type and label (the cluster's CA, etcd and
// service account keys) are held without their data.
func kubeconfigOnly(o any) (any, error) {
	if s, ok := o.(*corev1.Secret); ok && !strings.HasSuffix(s.Name, "-kubeconfig") {
		s = s.DeepCopy()
		s.Data, s.StringData = nil, nil
		s.ManagedFields = nil
		return s, nil
	}
	return o, nil
}

// kubeconfigSecret is the Secret <name>-kubeconfig of namespace the
// informers hold, nil if none.
func kubeconfigSecret(informers []cache.SharedIndexInformer, namespace, name string) *corev1.Secret {
	for _, inf := range informers {
		o, ok, err := inf.GetStore().GetByKey(namespace + "/" + name + "-kubeconfig")
		if err != nil || !ok {
			continue
		}
		if s, ok := o.(*corev1.Secret); ok {
			return s
		}
	}
	return nil
}

// ClusterAPICluster is the cluster a Cluster API Cluster is: named after
// it (a DNS label), labelled with its labels, reached with the kubeconfig
// of its Secret (nil: none yet). The error says why it is none: no
// kubeconfig Secret yet, a Secret that is not Cluster API's kubeconfig of
// this cluster or holds no kubeconfig, or a Cluster being deleted.
func ClusterAPICluster(c *metav1.PartialObjectMetadata, s *corev1.Secret) (config.Cluster, error) {
	src := "fleet.discovery.clusterAPI: Cluster " + c.Namespace + "/" + c.Name
	if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
		return config.Cluster{}, fmt.Errorf("%s: cluster name %q is not a DNS label (flotilla's cluster names are): %s", src, c.Name, strings.Join(errs, "; "))
	}
	if c.DeletionTimestamp != nil {
		return config.Cluster{}, fmt.Errorf("%s: being deleted", src)
	}
	if s == nil {
		return config.Cluster{}, fmt.Errorf("%s: no kubeconfig Secret %s-kubeconfig yet", src, c.Name)
	}
	switch {
	case s.Type != SecretTypeClusterAPI:
		return config.Cluster{}, fmt.Errorf("%s: Secret %s is of type %q, not %s", src, s.Name, s.Type, SecretTypeClusterAPI)
	case s.Labels[LabelClusterName] != c.Name:
		return config.Cluster{}, fmt.Errorf("%s: Secret %s is labelled %s=%q, not the Cluster's name", src, s.Name, LabelClusterName, s.Labels[LabelClusterName])
	}
	kc := s.Data[ClusterAPIKubeconfigKey]
	if len(kc) == 0 {
		return config.Cluster{}, fmt.Errorf("%s: Secret %s has no data.%s", src, s.Name, ClusterAPIKubeconfigKey)
	}
	cfg, err := clientcmd.Load(kc)
	if err != nil {
		return config.Cluster{}, fmt.Errorf("%s: Secret %s: data.%s: %w", src, s.Name, ClusterAPIKubeconfigKey, err)
	}
	if ctx := cfg.Contexts[cfg.CurrentContext]; ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		return config.Cluster{}, fmt.Errorf("%s: Secret %s: data.%s: its current context %q names no cluster", src, s.Name, ClusterAPIKubeconfigKey, cfg.CurrentContext)
	}
	return config.Cluster{Name: c.Name, Labels: maps.Clone(c.Labels), Source: src, KubeconfigData: kc}, nil
}
