package v1alpha1

import (
	_ "embed"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API's group and version.
var GroupVersion = schema.GroupVersion{Group: "flotilla.dev", Version: "v1alpha1"}

// Applications is the Applications' resource.
var Applications = GroupVersion.WithResource("applications")

// Clusters is the Clusters' resource.
var Clusters = GroupVersion.WithResource("clusters")

// WavePolicies is the WavePolicies' resource.
var WavePolicies = GroupVersion.WithResource("wavepolicies")

// CRD is the Application CustomResourceDefinition, as controller-gen
// writes it (the chart's crds/ holds the same file).
//
//go:embed crds/flotilla.dev_applications.yaml
var CRD []byte

// ClusterCRD is the Cluster CustomResourceDefinition, as controller-gen
// writes it (the chart's crds/clusters.yaml is the same file).
//
//go:embed crds/flotilla.dev_clusters.yaml
var ClusterCRD []byte

// WavePolicyCRD is the WavePolicy CustomResourceDefinition, as
// controller-gen writes it (the chart's crds/wavepolicies.yaml).
//
//go:embed crds/flotilla.dev_wavepolicies.yaml
var WavePolicyCRD []byte

// AddToScheme registers the API's types in a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Application{}, &ApplicationList{}, &Cluster{}, &ClusterList{}, &WavePolicy{}, &WavePolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
