package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// kuratorAliases folds the fields of a pasted Kurator rollout block (and
// Kanary's validation fields) into flotilla's, before defaults apply, and
// returns the problems: a name set twice to different values, and the
// fields whose meaning flotilla cannot honour.
func kuratorAliases(c *Config) []Problem {
	var ps []Problem
	add := func(path, format string, args ...any) {
		ps = append(ps, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	for i := range c.Applications {
		a := &c.Applications[i]
		p := fmt.Sprintf("applications[%d]", i)
		if v := a.Workload.APIVersion; v != "" && v != "apps/v1" {
			add(p+".workload.apiVersion", "Flagger targets apps/v1 Deployments and DaemonSets; got %q", v)
		}
		if ns := a.Workload.Namespace; ns != "" {
			switch {
			case a.Namespace == "":
				a.Namespace = ns
			case a.Namespace != ns:
				add(p+".workload.namespace", "%q differs from namespace %q (Kurator's workload.namespace is flotilla's namespace): set one", ns, a.Namespace)
			}
		}
		if n := a.ServiceName; n != "" {
			switch {
			case a.Service.Name == "":
				a.Service.Name = n
			case a.Service.Name != n:
				add(p+".serviceName", "%q differs from service.name %q (Kurator's serviceName is service.name): set one", n, a.Service.Name)
			}
		}
		if port := a.Port; port != 0 {
			switch {
			case a.Service.Port == 0:
				a.Service.Port = port
			case a.Service.Port != port:
				add(p+".port", "%d differs from service.port %d (Kurator's port is service.port): set one", port, a.Service.Port)
			}
		}
		if rp := a.RolloutPolicy; rp != nil {
			if reflect.DeepEqual(a.Delivery, Delivery{}) {
				a.Delivery = *rp
			} else {
				add(p+".rolloutPolicy", "set either delivery or rolloutPolicy (Kurator's name for it), not both")
			}
		}
		if a.TestLoader {
			a.Delivery.TestLoader = true
		}
		if tp := a.TrafficRoutingProvider; tp != "" {
			d := &a.Delivery
			switch {
			case d.Provider == "" && d.TrafficRoutingProvider == "":
				d.TrafficRoutingProvider = tp
			case d.Provider != "" && d.Provider != tp, d.TrafficRoutingProvider != "" && d.TrafficRoutingProvider != tp:
				add(p+".trafficRoutingProvider", "%q differs from the delivery's provider: set one", tp)
			}
		}
		if v := a.Validation; v != nil {
			if v.NoUpdate {
				add(p+".validation.noUpdate", "true is not supported: Kanary's noUpdate validates a canary without promoting it, and a Flagger canary that passes is promoted (use a manual validation with statusAfterDeadline: none to hold it)")
			}
			for j, it := range v.Items {
				if m := it.Manual; m != nil && m.Status != "" {
					add(fmt.Sprintf("%s.validation.items[%d].manual.status", p, j), "is decided at run time here: `flotilla approve` (or --reject) the rollout instead of writing %q into the config", m.Status)
				}
			}
		}
	}
	return ps
}

// rolloutPolicyPaths names the problems of a delivery policy written as
// Kurator's rolloutPolicy by that name.
func rolloutPolicyPaths(c *Config, verr *ValidationError) {
	for i, a := range c.Applications {
		if a.RolloutPolicy == nil {
			continue
		}
		from, to := fmt.Sprintf("applications[%d].delivery", i), fmt.Sprintf("applications[%d].rolloutPolicy", i)
		if slices.ContainsFunc(verr.Problems, func(p Problem) bool { return p.Path == to }) {
			continue // both set: delivery is the user's own
		}
		for j, p := range verr.Problems {
			if p.Path == from || strings.HasPrefix(p.Path, from+".") {
				verr.Problems[j].Path = to + strings.TrimPrefix(p.Path, from)
			}
		}
	}
}
