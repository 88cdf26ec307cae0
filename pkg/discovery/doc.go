// Package discovery finds the fleet's clusters in an inventory the
// platform team keeps already, beside the file's fleet.clusters, and
// follows it live (fleet.discovery). A Source reads one or more
// inventories of the management cluster:
//
//   - Argo CD's declarative cluster Secrets (argocd.go): each Secret
//     labelled argocd.argoproj.io/secret-type=cluster is a cluster named
//     after its data.name, reached at data.server with data.config's
//     credentials, its labels the Secret's.
//   - the sig-multicluster ClusterProfiles (clusterprofile.go, KEP-4322,
//     multicluster.x-k8s.io/v1alpha1), read as unstructured objects: each
//     is a cluster named after the ClusterProfile, its labels the
//     ClusterProfile's, reached at the server and CA of the first
//     configured access provider it lists, with that provider's exec
//     plugin (sigs.k8s.io/cluster-inventory-api's pkg/access model); one
//     whose ControlPlaneHealthy condition is False is left out.
//   - Cluster API's Clusters (clusterapi.go, cluster.x-k8s.io/v1beta1,
//     read as metadata): each is a cluster named after the Cluster, its
//     labels the Cluster's, reached with the kubeconfig of its Secret
//     <cluster>-kubeconfig; one without that Secret yet is left out.
//
// The labels are what the waves' selectors read. An entry added, changed
// or deleted swaps in a configuration with the clusters as they are then
// (pkg/reload): a cluster that appears enters the wave its labels select,
// for the next rollout; one that goes leaves the rollouts in flight.
//
// The ClusterProfiles are read with client-go's dynamic client rather
// than the module sigs.k8s.io/cluster-inventory-api: its releases need
// Kubernetes' libraries v0.35 (flotilla is on v0.34) and the module proxy
// here refuses its earlier commits.
package discovery
