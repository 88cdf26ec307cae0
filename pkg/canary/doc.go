// Package canary renders an application's delivery policy (Kurator's
// unified rollout policy, see pkg/config) into the Kubernetes objects that
// run it in one cluster for one rollout, with Flagger's and Kubernetes' own
// Go API types:
//
//   - the Flagger Canary (canary.go), for every strategy and traffic
//     provider;
//   - a Flagger MetricTemplate per custom metric (metrics.go);
//   - a HorizontalPodAutoscaler when the policy autoscales (autoscale.go);
//   - Flagger's load tester, a Deployment and a Service, when the policy
//     sets testLoader (loadtester.go).
//
// Every object carries the labels of Labels, so that Selector finds
// everything flotilla created for an application again. Flagger itself
// creates the provider's objects (virtual services, routes, primaries), so
// flotilla renders none of them.
package canary
