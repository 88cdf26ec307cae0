package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// WavePolicy is the fleet's waves as a resource of the management
// cluster: what the configuration file's fleet.waves, fleet.wavePolicy
// and fleet.freezeWindows say. flotilla honours it only in the platform's
// namespaces (server.resources.platformNamespaces), and only one: the
// oldest there that it can take; while one is in force its waves, policy
// and freeze windows replace the file's, validated with the rest of the
// configuration as one. Its Ready condition says whether it is in force,
// and why not.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=fwp,categories=flotilla
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Waves",type=string,JSONPath=`.status.waves`
// +kubebuilder:printcolumn:name="Message",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type WavePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:Required
	Spec   WavePolicySpec   `json:"spec"`
	Status WavePolicyStatus `json:"status,omitempty"`
}

// WavePolicyList is a list of WavePolicies.
//
// +kubebuilder:object:root=true
type WavePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WavePolicy `json:"items"`
}

// WavePolicySpec is the file's fleet.waves, fleet.wavePolicy and
// fleet.freezeWindows: the same fields, names, defaults and meanings
// (docs: config/example.yaml). All three replace the file's while the
// resource is in force (a field left out is its default, not the
// file's).
//
// +kubebuilder:object:generate=false
type WavePolicySpec struct {
	// Waves are rolled out one after another; every cluster is in exactly
	// one wave. At least one.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinItems=1
	Waves []config.Wave `json:"waves"`
	// WavePolicy is every wave's policy, unless the wave sets its own.
	WavePolicy config.WavePolicy `json:"wavePolicy,omitzero"`
	// FreezeWindows hold every rollout.
	FreezeWindows []config.FreezeWindow `json:"freezeWindows,omitempty"`
}

// WavePolicyStatus is what flotilla made of the resource.
type WavePolicyStatus struct {
	// ObservedGeneration is the generation the conditions speak of.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready is True when its waves are in force; False with
	// reason NotPlatformNamespace (outside
	// server.resources.platformNamespaces: nothing changes), Conflict
	// (another WavePolicy, older, is in force), Invalid (the validator's
	// problems in the message; the generation accepted before, or the
	// file's waves, stay) or NotApplied (valid, but the configuration it
	// belongs to was refused: the message says why).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Waves are the names of the waves in force, in order, while it is.
	Waves []string `json:"waves,omitempty"`
}

// ReasonConflict is a WavePolicy's Ready reason when an older one is in
// force.
const ReasonConflict = "Conflict"
