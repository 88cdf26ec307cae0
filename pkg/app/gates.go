package app

import (
	"maps"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
)

// canaryOwners names the application a canary was made for
// (pkg/cluster.Set): the canary of another workload of a git release is
// named after that workload, not the application's.
type canaryOwners interface {
	CanaryApplication(cluster, namespace, name string) (app, kind string, ok bool)
}

// validationPolicies maps the canaries of the applications in force to
// their validation policies: an application's own canary by its workload's
// name, each other workload's of a git release (which carries the
// release's delivery policy, its gates included) by the application it
// was made for, as owners reads it (nil: none).
func validationPolicies(live config.Provider, owners canaryOwners) gates.Policies {
	return func(cluster, namespace, name string) (gates.Policy, bool) {
		cfg := live.Current()
		for _, a := range cfg.Applications {
			if a.Namespace == namespace && a.Workload.Name == name {
				return policyOf(a), true
			}
		}
		if owners == nil {
			return gates.Policy{}, false
		}
		if app, kind, ok := owners.CanaryApplication(cluster, namespace, name); ok {
			if a, ok := cfg.Application(app); ok && a.Source != nil && a.Source.Git != nil && a.Namespace == namespace {
				p := policyOf(a)
				p.Kind = kind // the label watch reads the canary's own target
				return p, true
			}
		}
		return gates.Policy{}, false
	}
}

// policyOf translates an application's Kanary validations for pkg/gates.
// PromQL items are Flagger metrics: pkg/canary renders them.
func policyOf(a config.Application) gates.Policy {
	v := a.Validation
	if v == nil {
		return gates.Policy{}
	}
	p := gates.Policy{Kind: a.Workload.Kind, Period: v.ValidationPeriod.Duration}
	for _, it := range v.Items {
		switch {
		case it.Manual != nil:
			p.Manual = &gates.Manual{StatusAfterDeadline: gates.Status(it.Manual.StatusAfterDeadline)}
		case it.LabelWatch != nil:
			if p.LabelWatch == nil {
				p.LabelWatch = &gates.LabelWatch{DeploymentInvalidationLabels: map[string]string{}, PodInvalidationLabels: map[string]string{}}
			}
			maps.Copy(p.LabelWatch.DeploymentInvalidationLabels, it.LabelWatch.DeploymentInvalidationLabels)
			maps.Copy(p.LabelWatch.PodInvalidationLabels, it.LabelWatch.PodInvalidationLabels)
		}
	}
	return p
}
