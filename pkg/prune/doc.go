// Package prune removes, from every cluster of the fleet, what flotilla
// created for a delivery policy that is gone: removing an application's
// rollout policy removes everything flotilla created for it (Kanary's clean
// up, for the policy rather than for one canary).
//
// Prune lists each of canary.OwnedResources in all namespaces, selecting
// flotilla's labels (canary.Labels), and deletes what the current config no
// longer renders (canary.Render): the objects of an application that is no
// longer configured, and the objects an application no longer needs (its
// HorizontalPodAutoscaler once autoscale is removed, its load tester once
// testLoader is, the MetricTemplate of a removed custom metric, the Canary of
// a workload the application no longer names or of a namespace it left).
// Objects are compared by group, kind, namespace and name; one the config
// renders for any application is kept, whatever application its label names
// (the next apply takes it over).
//
// Prune never deletes an object without flotilla's labels, nor one that has
// a controller: Flagger copies the labels of what flotilla applies onto what
// it makes of it (the primary's HorizontalPodAutoscaler, <name>-primary), and
// those belong to their Canary and go with it. Deleting a Canary leaves the
// workload to Flagger: with revertOnDeletion its finalizer restores the
// workload and its service before the Canary goes.
package prune
