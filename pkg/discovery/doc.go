// Package discovery finds the fleet's clusters in an inventory the
// platform team keeps already, beside the file's fleet.clusters, and
// follows it live (fleet.discovery). Its one source is Argo CD's
// declarative cluster Secrets (argocd.go): each Secret labelled
// argocd.argoproj.io/secret-type=cluster is a cluster named after its
// data.name, reached at data.server with data.config's credentials, its
// labels the Secret's, which the waves' selectors read. A Secret added,
// changed or deleted swaps in a configuration with the clusters as they
// are then (pkg/reload): a cluster that appears enters the wave its
// labels select, for the next rollout; one that goes leaves the rollouts
// in flight.
//
// Argo CD's Secrets rather than the sig-multicluster ClusterProfile API
// (sigs.k8s.io/cluster-inventory-api), whose module this project's
// module proxy does not serve, or Cluster API's kubeconfig Secrets, whose
// labels are on the Cluster object beside them: an Argo CD cluster Secret
// holds the cluster's name, server, credentials and labels in one object,
// the labels Argo CD's own cluster generator selects on.
package discovery
