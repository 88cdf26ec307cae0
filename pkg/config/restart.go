package config

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
)

// RestartFields names the fields whose change from old to next a running
// flotilla cannot take live: what it built once at start-up from them (its
// listener, store or bus, the intake's receivers, the API's tokens and
// single sign-on, the authorization policy, the registries' credentials,
// the executor, the signature policies) would keep the old values. Sorted;
// empty when next may be swapped in whole.
//
// Everything else changes live: applications added, changed and removed
// (their signature policies aside), the clusters (added, removed, another
// kubeconfig or context; under the Tekton executor a changed one's
// kubeconfig aside) and their labels, the waves and
// their policy, freeze windows, approvals, the poll and the reconcile's
// interval (not turned on or off).
func RestartFields(old, next *Config) []string {
	var out []string
	out = append(out, differingFields("server", old.Server, next.Server)...)
	out = append(out, differingFields("events", old.Events, next.Events)...)
	out = append(out, differingFields("telemetry", old.Telemetry, next.Telemetry)...)
	out = append(out, byName("receivers", old.Receivers, next.Receivers, func(r Receiver) string { return r.Name }, alwaysRestart[Receiver])...)
	for name, pair := range map[string][2]any{
		"registries": {old.Registries, next.Registries},
		"projects":   {old.Projects, next.Projects},
		"rbac":       {old.RBAC, next.RBAC},
		"kubecd":     {old.KubeCD, next.KubeCD},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			out = append(out, name)
		}
	}
	if old.Fleet.Executor != next.Fleet.Executor {
		out = append(out, "fleet.executor")
	}
	if !reflect.DeepEqual(old.Fleet.Tekton, next.Fleet.Tekton) {
		out = append(out, "fleet.tekton")
	}
	if !reflect.DeepEqual(old.Fleet.Discovery, next.Fleet.Discovery) { // its watch is started once
		out = append(out, "fleet.discovery")
	}
	if (old.ReconcileInterval() > 0) != (next.ReconcileInterval() > 0) {
		out = append(out, "fleet.reconcile.interval (turned on or off)")
	}
	// The clusters change live (pkg/cluster's Set.Update: clients made
	// anew, watch caches stopped), except under the Tekton executor, which
	// wrote a cluster's kubeconfig into a Secret once, at its first run:
	// another kubeconfig or context of a cluster it ran in needs a restart
	// there (a cluster added or removed does not).
	if next.Fleet.Executor == ExecutorTekton {
		out = append(out, byName("fleet.clusters", old.Fleet.Clusters, next.Fleet.Clusters, func(c Cluster) string { return c.Name },
			func(o, n *Cluster) bool {
				return o != nil && n != nil && (o.Kubeconfig != n.Kubeconfig || o.Context != n.Context || !bytes.Equal(o.KubeconfigData, n.KubeconfigData))
			}, " (the tekton executor's kubeconfig Secret)")...)
	}
	// The signature policies are compiled at start-up: an application
	// whose verify block is new or changed would be checked against the
	// old one (or none).
	out = append(out, byName("applications", old.Applications, next.Applications, func(a Application) string { return a.Name },
		func(o, n *Application) bool {
			switch {
			case n == nil:
				return false // removed: its policy is no longer asked for
			case o == nil:
				return n.Verify != nil
			}
			return !reflect.DeepEqual(o.Verify, n.Verify)
		}, ".verify")...)
	slices.Sort(out)
	return out
}

func alwaysRestart[T any](o, n *T) bool { return o == nil || n == nil || !reflect.DeepEqual(*o, *n) }

// byName names, as path[name] (plus suffix), the items of old and next
// (matched by name; nil where absent) that need a restart.
func byName[T any](path string, old, next []T, name func(T) string, restart func(o, n *T) bool, suffix ...string) []string {
	olds := map[string]*T{}
	for i := range old {
		olds[name(old[i])] = &old[i]
	}
	var out []string
	seen := map[string]bool{}
	for i := range next {
		n := &next[i]
		seen[name(*n)] = true
		if restart(olds[name(*n)], n) {
			out = append(out, path+"["+name(*n)+"]"+strings.Join(suffix, ""))
		}
	}
	for k, o := range olds {
		if !seen[k] && restart(o, nil) {
			out = append(out, path+"["+k+"]"+strings.Join(suffix, ""))
		}
	}
	return out
}

// differingFields names path.<json name> for each field of the structs
// old and next that differs. A resolved secret (a field XValue, never
// marshalled) is named as its reference X: a changed file behind an
// unchanged reference needs the restart too.
func differingFields(path string, old, next any) []string {
	ov, nv := reflect.ValueOf(old), reflect.ValueOf(next)
	t := ov.Type()
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || reflect.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			continue
		}
		name := jsonName(f)
		if name == "" {
			if ref, ok := t.FieldByName(strings.TrimSuffix(f.Name, "Value")); ok && strings.HasSuffix(f.Name, "Value") {
				name = jsonName(ref)
			}
		}
		if name == "" {
			name = f.Name
		}
		if n := path + "." + name; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// jsonName is f's name in the file, "" when it is never marshalled.
func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if name == "-" {
		return ""
	}
	return name
}
