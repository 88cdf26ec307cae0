package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster is one cluster of the fleet as a resource of the management
// cluster: what the configuration file's fleet.clusters[] entry says, its
// name the resource's, its kubeconfig in a Secret of its namespace.
// flotilla honours it only in the platform's namespaces
// (server.resources.platformNamespaces), adds it to the file's clusters,
// validated with them as one configuration (the waves' selectors read its
// labels), and says in the Ready condition whether it took it and in
// status.wave which wave has it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fcl,categories=flotilla
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Wave",type=string,JSONPath=`.status.wave`
// +kubebuilder:printcolumn:name="Labels",type=string,priority=1,JSONPath=`.spec.labels`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name: a cluster's name is a DNS label (lower-case letters, digits and '-', at most 63)"
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec   ClusterSpec   `json:"spec"`
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterList is a list of Clusters.
//
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Cluster `json:"items"`
}

// ClusterSpec is config.Cluster without its name (the resource's) and
// with its kubeconfig read from a Secret of the resource's namespace
// instead of a file of flotilla's pod.
type ClusterSpec struct {
	// Labels are the cluster's labels, which the waves' selectors
	// (fleet.waves[].selector) and the applications' clusterSelector read.
	Labels map[string]string `json:"labels,omitempty"`
	// Kubeconfig is where the cluster's kubeconfig is. Required.
	// +kubebuilder:validation:Required
	Kubeconfig ClusterKubeconfig `json:"kubeconfig"`
	// Context is the kubeconfig's context to use; empty: its current one.
	Context string `json:"context,omitempty"`
}

// ClusterKubeconfig names the Secret holding a cluster's kubeconfig.
type ClusterKubeconfig struct {
	// SecretRef is a Secret of the Cluster's namespace and the key of its
	// data holding the kubeconfig. Required.
	// +kubebuilder:validation:Required
	SecretRef SecretKeyRef `json:"secretRef"`
}

// SecretKeyRef names a key of a Secret in the resource's namespace.
type SecretKeyRef struct {
	// Name of the Secret. Required.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key of the Secret's data. Default "value" (as Cluster API's
	// <cluster>-kubeconfig Secrets and Flux's kubeConfig.secretRef have
	// it).
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// DefaultKubeconfigKey is SecretKeyRef.Key's default.
const DefaultKubeconfigKey = "value"

// ClusterStatus is what flotilla made of the resource.
type ClusterStatus struct {
	// ObservedGeneration is the generation the conditions speak of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when the cluster is in flotilla's
	// configuration in force; False with reason NotPlatformNamespace (the
	// resource is outside server.resources.platformNamespaces: nothing
	// changes), Invalid (its Secret, its kubeconfig or the validator's
	// problems in the message), NameConflict (another cluster, of the
	// file, of an inventory or an older resource, has the name) or
	// NotApplied (valid, but the configuration it belongs to was refused:
	// the message says why).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Wave is the wave the cluster is in (its labels select it, or the
	// wave lists it); empty when none.
	Wave string `json:"wave,omitempty"`
}

// ReasonNotPlatformNamespace is a Cluster's Ready reason outside the
// platform's namespaces.
const ReasonNotPlatformNamespace = "NotPlatformNamespace"
