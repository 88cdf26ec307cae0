// Package v1alpha1 is flotilla's configuration API as Kubernetes custom
// resources (group flotilla.dev, version v1alpha1): the Application, one
// of the configuration's applications kept as a namespaced resource of
// the management cluster, the Cluster, one of the fleet's clusters kept
// in a platform namespace, and the WavePolicy, the fleet's waves, which
// pkg/resources watches and adds to (or, for the waves, puts in place of)
// the configuration file's.
//
// An Application's spec is the file's application with the same field
// names and meanings (config.Application, its name the resource's
// metadata.name); its status says whether flotilla took it (the Ready
// condition, with the validator's reason when it did not) and what
// flotilla did with it: the last version seen, skipped and rolled out,
// and the latest rollout.
//
// The CustomResourceDefinitions (crds/, which the chart
// installs from its own copy) and zz_generated.deepcopy.go are written by
// controller-gen from these types and their markers: `make generate`.
//
// +kubebuilder:object:generate=true
// +kubebuilder:validation:Optional
// +groupName=flotilla.dev
package v1alpha1
