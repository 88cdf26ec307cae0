package canary

import (
	"slices"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
)

// AnnotationWorkloads, on the Canary of a git application's workload (the
// application's own), lists every workload of the release its commit
// renders that has a canary of its own, comma-separated, the
// application's first: a cluster reader (pkg/cluster) judges the release
// in that cluster by all of them. Absent when the release has one
// workload.
const AnnotationWorkloads = "flotilla.dev/workloads"

// ReleaseWorkloads returns the workloads c's AnnotationWorkloads lists
// besides c's own target (nil when it lists none).
func ReleaseWorkloads(c *flaggerv1.Canary) []string {
	var out []string
	for _, n := range strings.Split(c.Annotations[AnnotationWorkloads], ",") {
		if n = strings.TrimSpace(n); n != "" && n != c.Name && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// ForWorkload returns the Canary of another workload of the same release
// (kind Deployment or DaemonSet, named name, in c's namespace), with c's
// delivery policy: a copy of c, named after its target as every canary
// flotilla makes is, whose Service is named after the workload (Flagger's
// default: c's service name belongs to c's workload). What refers to one
// workload alone is left out: the autoscaler (an HPA scales one
// Deployment) and the ingress (it routes to one Service). The webhooks
// (flotilla's events, the gates, the user's and the load test's) stay:
// Flagger reports each canary's events to flotilla with the rollout's
// metadata.
func ForWorkload(c *flaggerv1.Canary, kind, name string) *flaggerv1.Canary {
	out := c.DeepCopy()
	out.Name = name
	out.ResourceVersion, out.UID = "", ""
	delete(out.Annotations, AnnotationWorkloads)
	out.Spec.TargetRef = flaggerv1.LocalObjectReference{APIVersion: "apps/v1", Kind: kind, Name: name}
	out.Spec.Service.Name = ""
	out.Spec.AutoscalerRef = nil
	out.Spec.IngressRef = nil
	return out
}
