// Package resources is the management cluster's Application resources
// (flotilla.dev/v1alpha1, package v1alpha1) as a source of flotilla's
// configuration, beside the file (server.resources).
//
// A Source watches the Applications of its namespaces with client-go's
// informers. Each change builds the configuration again (Build: the file,
// config.LoadWith, with every resource's application after the file's
// own) and swaps it in through pkg/reload, the one swap every source goes
// through; the file's own reloads build through Build too, so neither
// source drops the other's applications. The validator is the file's:
// a resource it finds a problem in is left out (or, when an earlier
// generation of it was accepted, that generation stays), the others go
// on, and its Ready condition says False with the problems (reason
// Invalid; NameConflict when the file or an older resource has the name);
// nothing else changes. A resource that cannot be decoded, or that names
// a secret of flotilla's own process (a team must not borrow flotilla's
// environment or files), is Invalid alike.
//
// With platform namespaces (server.resources.platformNamespaces) the
// Cluster resources are a source too (cluster.go): each Cluster of a
// platform namespace is a cluster of the fleet named after it, labelled
// with spec.labels, reached with the kubeconfig of the Secret its spec
// names in its namespace (watched too: a rotated kubeconfig is a change);
// it joins the clusters after the file's and the discovered ones, and is
// refused (Invalid, NameConflict, keeping the generation accepted before)
// as an Application is. A Cluster of a team's namespace is not Ready
// (NotPlatformNamespace) and changes nothing: a team may not add clusters
// to the fleet. Its status says which wave has it.
//
// The WavePolicy resources of the platform namespaces (wavepolicy.go)
// give the fleet's waves, wave policy and freeze windows in place of the
// file's (config.Extra.Waves): the oldest one the validator takes is in
// force, a younger one is Conflict; the validator's problems of the
// waves (and a cluster they leave in no wave) are its own, refused as an
// Application's are.
//
// RunStatus writes each resource's status (in scale-out mode on one
// replica): observedGeneration, Ready (True once its application is in
// the configuration in force; NotApplied when the configuration it
// belongs to was refused whole, by a guard or a field needing a restart)
// and, from the application's state, the last version seen, skipped and
// deployed, and the latest rollout, refreshed as the journal grows.
package resources
