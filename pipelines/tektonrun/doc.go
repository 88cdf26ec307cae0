// Package tektonrun is the Tekton executor: it creates a PipelineRun of
// flotilla-rollout (Tekton's v1 types and clientset) in the cluster that
// runs Tekton, keeps each target cluster's kubeconfig Secret there
// (ApplyKubeconfigSecret), labels the run flotilla.dev/rollout, follows it
// by watching, ends the wait early when Observe sees its completion in
// Tekton's CloudEvents, and reads its results from status.results. A run is
// named after its rollout, cluster and image, so a request handed over
// again follows the run under way instead of starting another.
package tektonrun
