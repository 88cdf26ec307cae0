package app

import (
	"maps"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
)

// validationPolicies maps the canaries of cfg's applications to their
// validation policies.
func validationPolicies(cfg *config.Config) gates.Policies {
	return func(cluster, namespace, name string) (gates.Policy, bool) {
		for _, a := range cfg.Applications {
			if a.Namespace == namespace && a.Workload.Name == name {
				return policyOf(a), true
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
