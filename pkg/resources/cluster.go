package resources

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// ClusterSource is what a Cluster resource's cluster says it comes from
// (config.Cluster.Source: the API's source, the validator's problem
// paths).
func ClusterSource(namespace, name string) string {
	return "server.resources: Cluster " + namespace + "/" + name
}

// SecretData reads a key of a Secret of a namespace: its value, and why
// there is none.
type SecretData func(namespace, name, key string) ([]byte, error)

// ConvertCluster is a Cluster resource's cluster: its spec decoded
// strictly and named after the resource, reached with the kubeconfig of
// the Secret its spec names (in the resource's namespace, read with
// secret), switched to spec.context when set. A kubeconfig that does not
// load, or whose context names no cluster, is refused.
func ConvertCluster(u *unstructured.Unstructured, secret SecretData) (config.Cluster, error) {
	raw, err := json.Marshal(u.Object["spec"])
	if err != nil {
		return config.Cluster{}, fmt.Errorf("spec: %w", err)
	}
	var spec v1alpha1.ClusterSpec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return config.Cluster{}, fmt.Errorf("spec: %w", err)
	}
	ref := spec.Kubeconfig.SecretRef
	if ref.Name == "" {
		return config.Cluster{}, fmt.Errorf("spec.kubeconfig.secretRef.name: required")
	}
	k := cmp.Or(ref.Key, v1alpha1.DefaultKubeconfigKey)
	data, err := secret(u.GetNamespace(), ref.Name, k)
	if err != nil {
		return config.Cluster{}, fmt.Errorf("spec.kubeconfig.secretRef: %w", err)
	}
	kc, err := kubeconfigOf(data, spec.Context)
	if err != nil {
		return config.Cluster{}, fmt.Errorf("spec.kubeconfig.secretRef: Secret %s, key %s: %w", ref.Name, k, err)
	}
	return config.Cluster{Name: u.GetName(), Labels: maps.Clone(spec.Labels), Context: spec.Context,
		Source: ClusterSource(u.GetNamespace(), u.GetName()), KubeconfigData: kc}, nil
}

// kubeconfigOf is the kubeconfig data with context as its current one
// (data itself when context is empty), checked: it loads and its current
// context names a cluster.
func kubeconfigOf(data []byte, context string) ([]byte, error) {
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	if context != "" {
		if cfg.Contexts[context] == nil {
			return nil, fmt.Errorf("the kubeconfig has no context %q (spec.context)", context)
		}
		cfg.CurrentContext = context
	}
	if c := cfg.Contexts[cfg.CurrentContext]; c == nil || cfg.Clusters[c.Cluster] == nil {
		return nil, fmt.Errorf("the kubeconfig's current context %q names no cluster", cfg.CurrentContext)
	}
	if context == "" {
		return data, nil
	}
	out, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("writing the kubeconfig with context %q: %w", context, err)
	}
	return out, nil
}

// secretValue is a key of a Secret as the dynamic informer has it (data's
// values base64-encoded).
func secretValue(u *unstructured.Unstructured, key string) ([]byte, error) {
	s, ok, _ := unstructured.NestedString(u.Object, "data", key)
	if !ok || s == "" {
		return nil, fmt.Errorf("Secret %s has no data.%s", u.GetName(), key)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: data.%s: %w", u.GetName(), key, err)
	}
	return b, nil
}

// clusterProblem tells whether path is a problem of the cluster whose
// source is src, and its path in the resource (metadata.name for the
// name, spec.<field> for the others).
func clusterProblem(path, src string) (rest string, ok bool) {
	rest, ok = strings.CutPrefix(path, src)
	if !ok || rest != "" && rest[0] != '.' && rest[0] != '[' {
		return "", false
	}
	switch rest = strings.TrimPrefix(rest, "."); rest {
	case "name":
		return "metadata.name", true
	case "":
		return "spec", true
	}
	return "spec." + rest, true
}

// secretName is the Secret a Cluster resource's spec names ("" when
// none).
func secretName(u *unstructured.Unstructured) string {
	s, _, _ := unstructured.NestedString(u.Object, "spec", "kubeconfig", "secretRef", "name")
	return s
}
