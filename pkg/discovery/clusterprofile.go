package discovery

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

// ClusterProfileResource is the sig-multicluster ClusterProfile API's
// resource (KEP-4322, sigs.k8s.io/cluster-inventory-api), read as
// unstructured objects.
var ClusterProfileResource = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "clusterprofiles"}

// The names the ClusterProfile API and its access library give.
const (
	// ConditionControlPlaneHealthy is the ClusterProfile condition saying
	// whether the cluster's control plane is healthy.
	ConditionControlPlaneHealthy = "ControlPlaneHealthy"
	// ExtensionAdditionalArgs and ExtensionAdditionalEnvs are KEP-5339's
	// cluster extensions: arguments and environment a ClusterProfile adds
	// to its provider's exec plugin, as the provider's policies allow.
	ExtensionAdditionalArgs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
	ExtensionAdditionalEnvs = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"
)

// ClusterProfiles is the inventory of the ClusterProfiles of the
// configured namespaces (every namespace when none) matching the
// configured selector, read with client.
func ClusterProfiles(client dynamic.Interface, c config.ClusterProfileDiscovery) (Inventory, error) {
	if _, err := labels.Parse(c.Selector); err != nil {
		return Inventory{}, fmt.Errorf("fleet.discovery.clusterProfiles.selector: %w", err)
	}
	namespaces := c.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	inv := Inventory{source: sourceClusterProfile, what: "the ClusterProfiles"}
	if len(c.Namespaces) > 0 {
		inv.what += " in namespaces " + strings.Join(c.Namespaces, ", ")
	}
	for _, ns := range namespaces {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, ns,
			func(lo *metav1.ListOptions) { lo.LabelSelector = c.Selector })
		inv.informers = append(inv.informers, f.ForResource(ClusterProfileResource).Informer())
	}
	inv.entries = eachObject(inv.informers, func(o any) (entry, bool) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return entry{}, false
		}
		cl, err := ProfileCluster(u, c.Providers)
		return entry{key: "ClusterProfile " + u.GetNamespace() + "/" + u.GetName(), created: u.GetCreationTimestamp().Time, cluster: cl, err: err}, true
	})
	return inv, nil
}

// clusterProfile is the part of a ClusterProfile flotilla reads.
type clusterProfile struct {
	metav1.ObjectMeta `json:"metadata"`
	Status            struct {
		Conditions          []metav1.Condition `json:"conditions"`
		CredentialProviders []accessProvider   `json:"credentialProviders"` // deprecated name of accessProviders
		AccessProviders     []accessProvider   `json:"accessProviders"`
	} `json:"status"`
}

type accessProvider struct {
	Name    string              `json:"name"`
	Cluster clientcmdv1.Cluster `json:"cluster"`
}

// ProfileCluster is the cluster a ClusterProfile declares, as the
// cluster-inventory-api's pkg/access builds it: named after the
// ClusterProfile (a DNS label), labelled with its labels, reached at the
// cluster (server, CA, TLS server name, proxy, extensions) of the first
// provider of providers that the ClusterProfile lists in
// status.accessProviders (or the deprecated credentialProviders, which
// accessProviders override), with that provider's exec plugin, given the
// arguments and environment of the cluster's KEP-5339 extensions as the
// provider's policies allow. The error says why it is no cluster: its
// ControlPlaneHealthy condition is False, no provider matches, or its
// cluster does not parse.
func ProfileCluster(u *unstructured.Unstructured, providers []config.AccessProvider) (config.Cluster, error) {
	src := "fleet.discovery.clusterProfiles: ClusterProfile " + u.GetNamespace() + "/" + u.GetName()
	var cp clusterProfile
	b, err := json.Marshal(u.Object)
	if err == nil {
		err = json.Unmarshal(b, &cp)
	}
	if err != nil {
		return config.Cluster{}, fmt.Errorf("%s: reading it: %w", src, err)
	}
	name := cp.Name
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return config.Cluster{}, fmt.Errorf("%s: cluster name %q is not a DNS label (flotilla's cluster names are): %s", src, name, strings.Join(errs, "; "))
	}
	if c := findCondition(cp.Status.Conditions, ConditionControlPlaneHealthy); c != nil && c.Status == metav1.ConditionFalse {
		return config.Cluster{}, fmt.Errorf("%s: condition %s is False (%s: %s)", src, ConditionControlPlaneHealthy, c.Reason, c.Message)
	}
	listed := map[string]accessProvider{}
	for _, ap := range cp.Status.CredentialProviders {
		listed[ap.Name] = ap
	}
	for _, ap := range cp.Status.AccessProviders {
		listed[ap.Name] = ap
	}
	i := slices.IndexFunc(providers, func(p config.AccessProvider) bool { _, ok := listed[p.Name]; return ok })
	if i < 0 {
		return config.Cluster{}, fmt.Errorf("%s: lists no access provider of fleet.discovery.clusterProfiles.providers (it lists %s)",
			src, strings.Join(slices.Sorted(maps.Keys(listed)), ", "))
	}
	kc, err := profileKubeconfig(name, listed[providers[i].Name].Cluster, providers[i])
	if err != nil {
		return config.Cluster{}, fmt.Errorf("%s: access provider %s: %w", src, providers[i].Name, err)
	}
	return config.Cluster{Name: name, Labels: maps.Clone(cp.Labels), Source: src, KubeconfigData: kc}, nil
}

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// profileKubeconfig writes a kubeconfig of one context for the cluster:
// the provider's cluster (its extensions kept, so that the exec plugin
// gets client.authentication.k8s.io/exec's) and the provider's plugin.
func profileKubeconfig(name string, v1c clientcmdv1.Cluster, p config.AccessProvider) ([]byte, error) {
	if strings.TrimSpace(v1c.Server) == "" {
		return nil, fmt.Errorf("its cluster has no server")
	}
	c := clientcmdapi.NewCluster()
	if err := clientcmdlatest.Scheme.Convert(&v1c, c, nil); err != nil {
		return nil, fmt.Errorf("reading its cluster: %w", err)
	}
	e := p.ExecConfig
	exec := &clientcmdapi.ExecConfig{Command: e.Command, Args: slices.Clone(e.Args), APIVersion: e.APIVersion,
		InstallHint: e.InstallHint, ProvideClusterInfo: e.ProvideClusterInfo, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	if exec.APIVersion == "" {
		exec.APIVersion = "client.authentication.k8s.io/v1"
	}
	env := map[string]string{}
	for _, v := range e.Env {
		env[v.Name] = v.Value
	}
	for _, ext := range v1c.Extensions {
		var err error
		switch ext.Name {
		case ExtensionAdditionalArgs:
			exec.Args, err = profileArgs(exec.Args, ext.Extension.Raw, p.ProfileSourcedCLIArgsPolicy)
		case ExtensionAdditionalEnvs:
			err = profileEnv(env, ext.Extension.Raw, p.ProfileSourcedEnvVarsPolicy)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, k := range slices.Sorted(maps.Keys(env)) { // the same ClusterProfile, the same kubeconfig
		exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: env[k]})
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = c
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Exec: exec}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing its kubeconfig: %w", err)
	}
	return b, nil
}

// profileArgs appends the extension's arguments (a YAML or JSON list of
// strings) when the policy is Append.
func profileArgs(args []string, raw []byte, policy string) ([]string, error) {
	if policy != "Append" {
		return args, nil
	}
	var more []string
	if err := yaml.Unmarshal(raw, &more); err != nil {
		return nil, fmt.Errorf("extension %s: %w", ExtensionAdditionalArgs, err)
	}
	return append(args, more...), nil
}

// profileEnv adds the extension's variables (a YAML or JSON map) to env:
// those env has not (AppendIfNotExists), or all (Replace).
func profileEnv(env map[string]string, raw []byte, policy string) error {
	if policy != "AppendIfNotExists" && policy != "Replace" {
		return nil
	}
	var more map[string]string
	if err := yaml.Unmarshal(raw, &more); err != nil {
		return fmt.Errorf("extension %s: %w", ExtensionAdditionalEnvs, err)
	}
	for k, v := range more {
		if _, ok := env[k]; !ok || policy == "Replace" {
			env[k] = v
		}
	}
	return nil
}
