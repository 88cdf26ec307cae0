package bootstrap

import (
	"cmp"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-cd/flotilla/pipelines"
	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Defaults of Options.
const (
	DefaultNamespace        = "flotilla-system"
	DefaultFlaggerNamespace = "flagger-system"
	// DefaultMetricsServer is Flagger's chart's default Prometheus.
	DefaultMetricsServer = config.DefaultMetricsServer
)

// Options says what bootstrap puts into each cluster.
type Options struct {
	// Namespace holds flotilla's identity (ServiceAccount and token).
	// Default DefaultNamespace.
	Namespace string
	// FlaggerNamespace runs Flagger. Default DefaultFlaggerNamespace.
	FlaggerNamespace string
	// MeshProvider is Flagger's -mesh-provider. Default: the traffic
	// provider of the applications that target the cluster when they
	// agree, else "kubernetes" (flotilla's canaries name their provider).
	MeshProvider string
	// MetricsServer is Flagger's -metrics-server. Default the config's
	// fleet.metricsServer.
	MetricsServer string
	// FlaggerArgs are added to Flagger's arguments (such as
	// -slack-url=..., -enable-leader-election=true).
	FlaggerArgs []string
	// LoadTesterNamespace, when set, also installs Flagger's load tester
	// there.
	LoadTesterNamespace string
	// Image is the image of flotilla's Tekton steps. Default
	// pipelines.DefaultImage().
	Image string
	// Allow adds rules to DeliverRole: the kinds git applications render
	// (ParseAllow).
	Allow []rbacv1.PolicyRule
}

func (o Options) withDefaults() Options {
	o.Namespace = cmp.Or(o.Namespace, DefaultNamespace)
	o.FlaggerNamespace = cmp.Or(o.FlaggerNamespace, DefaultFlaggerNamespace)
	o.MetricsServer = cmp.Or(o.MetricsServer, DefaultMetricsServer)
	return o
}

// Target is one cluster and the objects bootstrap applies to it, in order.
type Target struct {
	// Name is the fleet cluster's name, or TektonTarget.
	Name string
	// Kubeconfig and Context reach the cluster (with rights to install:
	// CRDs, ClusterRoles, Namespaces).
	Kubeconfig, Context string
	// Flagger tells whether the target runs Flagger (fleet clusters do).
	Flagger bool
	Objects []*unstructured.Unstructured
	// FlaggerObjects names Flagger's own objects among Objects (its
	// Namespace, CRDs, ServiceAccount, ClusterRole and binding, and
	// controller): what bootstrap leaves out of a cluster where a Flagger
	// it did not install runs (WithoutFlagger). An object something else
	// of the target needs too (--flagger-namespace shared with the load
	// tester or an application) is not among them.
	FlaggerObjects []Ref
	// Replace names objects bootstrap may delete and create again where
	// another installer's Flagger stands in their place and the server
	// refuses to change it in place (TakeOver, --manage-flagger).
	Replace []Ref
}

// TektonTarget names the cluster that runs Tekton when it is not one of the
// fleet's (fleet.tekton.kubeconfig).
const TektonTarget = "tekton"

// Plan lists the targets of a config, the clusters named (all when none)
// and, with executor tekton, the cluster that runs Tekton: per fleet
// cluster Flagger, its load tester when asked, and flotilla's identity;
// in the Tekton cluster flotilla's Pipeline and Tasks, a Role to run them
// and the steps' ServiceAccount.
func Plan(cfg *config.Config, clusters []string, o Options) ([]Target, error) {
	o.MetricsServer = cmp.Or(o.MetricsServer, cfg.Fleet.MetricsServer)
	ts, err := plan(cfg, clusters, o.withDefaults())
	for i := range ts {
		shared := duplicated(ts[i].Objects)
		ts[i].FlaggerObjects = slices.DeleteFunc(ts[i].FlaggerObjects, func(r Ref) bool { return shared[r] })
		ts[i].Objects = dedupe(ts[i].Objects)
	}
	return ts, err
}

func plan(cfg *config.Config, clusters []string, o Options) ([]Target, error) {
	for _, name := range clusters {
		if _, ok := cfg.Cluster(name); !ok && name != TektonTarget {
			return nil, fmt.Errorf("no cluster %q in the config", name)
		}
	}
	want := func(name string) bool { return len(clusters) == 0 || slices.Contains(clusters, name) }
	var out []Target
	for _, c := range cfg.Fleet.Clusters {
		if !want(c.Name) {
			continue
		}
		objs, flagger, err := clusterObjects(cfg, c, o)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		out = append(out, Target{Name: c.Name, Kubeconfig: c.Kubeconfig, Context: c.Context, Flagger: true, Objects: objs, FlaggerObjects: flagger})
	}

	t := cfg.Fleet.Tekton
	if cfg.Fleet.Executor != config.ExecutorTekton || t == nil {
		return out, nil
	}
	objs, err := tektonObjects(t, o)
	if err != nil {
		return nil, fmt.Errorf("tekton: %w", err)
	}
	if t.Cluster != "" {
		// The Tekton cluster is a fleet cluster: its target gets these too.
		for i := range out {
			if out[i].Name == t.Cluster {
				out[i].Objects = append(out[i].Objects, objs...)
			}
		}
		return out, nil
	}
	if want(TektonTarget) {
		ident, err := accountOnly(o)
		if err != nil {
			return nil, err
		}
		out = append(out, Target{Name: TektonTarget, Kubeconfig: t.Kubeconfig, Context: t.Context, Objects: append(ident, objs...)})
	}
	return out, nil
}

// clusterObjects are a fleet cluster's objects, and which of them are
// Flagger's own.
func clusterObjects(cfg *config.Config, c config.Cluster, o Options) ([]*unstructured.Unstructured, []Ref, error) {
	var namespaces, providers []string
	git := false
	for _, app := range cfg.Applications {
		if !app.Targets(c) {
			continue
		}
		git = git || app.Git() != nil
		namespaces = append(namespaces, app.Namespace)
		providers = append(providers, canary.FlaggerProvider(app.Delivery.Provider))
	}
	slices.Sort(namespaces)
	namespaces = slices.Compact(namespaces)
	slices.Sort(providers)
	providers = slices.Compact(providers)
	provider := o.MeshProvider
	if provider == "" {
		provider = canary.FlaggerProvider("")
		if len(providers) == 1 {
			provider = providers[0]
		}
	}
	objs, err := flaggerObjects(o.FlaggerNamespace, append(flaggerArgs(provider, o.MetricsServer, c.Name), o.FlaggerArgs...))
	if err != nil {
		return nil, nil, err
	}
	flagger := make([]Ref, 0, len(objs))
	for _, f := range objs {
		flagger = append(flagger, RefOf(f))
	}
	if o.LoadTesterNamespace != "" {
		lt, err := loadTesterObjects(o.LoadTesterNamespace)
		if err != nil {
			return nil, nil, err
		}
		objs = append(objs, lt...)
	}
	// An application in flotilla's own namespace: dedupe drops the second
	// Namespace, its RoleBinding stays.
	if git { // a git application's inventory is a ConfigMap (pipelines/tasks/inventory.go)
		o.Allow = append(slices.Clone(o.Allow), InventoryRule)
	}
	ident, err := identity(o, namespaces)
	if err != nil {
		return nil, nil, err
	}
	return append(objs, ident...), flagger, nil
}

// tektonObjects are flotilla's Pipeline and Tasks in the executor's
// namespace, with the Role that runs them.
func tektonObjects(t *config.TektonExecutor, o Options) ([]*unstructured.Unstructured, error) {
	access, err := tektonAccess(o, t.Namespace, t.ServiceAccount)
	if err != nil {
		return nil, err
	}
	ps, err := pipelines.Objects(o.Image, t.Namespace)
	if err != nil {
		return nil, err
	}
	return append(access, ps...), nil
}

// duplicated names the objects listed more than once.
func duplicated(objs []*unstructured.Unstructured) map[Ref]bool {
	seen, out := map[Ref]bool{}, map[Ref]bool{}
	for _, o := range objs {
		r := RefOf(o)
		if seen[r] {
			out[r] = true
		}
		seen[r] = true
	}
	return out
}

// dedupe drops the later of two objects with the same Ref (a namespace both
// an application and the Tekton executor use).
func dedupe(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	seen := map[Ref]bool{}
	return slices.DeleteFunc(objs, func(o *unstructured.Unstructured) bool {
		r := RefOf(o)
		if seen[r] {
			return true
		}
		seen[r] = true
		return false
	})
}
