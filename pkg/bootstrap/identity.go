package bootstrap

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Names of flotilla's identity in a cluster.
const (
	// ServiceAccount is flotilla's identity in each cluster, in
	// Options.Namespace.
	ServiceAccount = "flotilla"
	// TokenSecret holds its long-lived token (filled in by the cluster's
	// token controller), which the kubeconfigs bootstrap writes carry.
	TokenSecret = "flotilla-token"
	// ReaderRole is the ClusterRole bound cluster-wide: reading what flotilla
	// renders, everywhere (the start-up prune looks for the objects of
	// removed applications in every namespace).
	ReaderRole = "flotilla-reader"
	// DeliverRole is the ClusterRole bound in each application namespace
	// only (RoleBindings): writing what flotilla renders.
	DeliverRole = "flotilla-deliver"
	// TektonRole is the Role, in the Tekton executor's namespace, that
	// runs PipelineRuns and keeps the kubeconfig Secrets they mount.
	TektonRole = "flotilla-tekton"
)

// verbs.
var (
	read  = []string{"get", "list", "watch"}
	write = []string{"create", "patch", "delete"}
)

// ReaderRules are ReaderRole's rules: what the observers, resync, gates and
// the start-up prune read. No Secrets, no RBAC, no Namespaces.
var ReaderRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"flagger.app"}, Resources: []string{"canaries", "metrictemplates"}, Verbs: read},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments", "daemonsets"}, Verbs: read},
	{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: read},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: read},
}

// DeliverRules are DeliverRole's rules, granted in application namespaces
// only: applying the Canary and what it refers to (server-side apply: create
// and patch), setting the workload's image (patch), pruning (delete), and
// listing the pods the label-watch gate reads.
var DeliverRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"flagger.app"}, Resources: []string{"canaries", "metrictemplates"}, Verbs: write},
	{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: write},
	{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"patch"}},
	{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: write},
	{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: write},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
}

// InventoryRule is granted to DeliverRole in a cluster a git application
// targets: its inventory, a ConfigMap flotilla-inventory-<application> in
// the application's namespace, is read, written and, with what it
// records, pruned.
var InventoryRule = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "patch", "delete"}}

// TektonRules are TektonRole's rules, in the Tekton executor's namespace.
var TektonRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"tekton.dev"}, Resources: []string{"pipelineruns"}, Verbs: []string{"create", "get", "list", "watch"}},
	{APIGroups: []string{"tekton.dev"}, Resources: []string{"taskruns"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "patch"}},
}

// ParseAllow reads an --allow value, "resource" or "group/resource" (such
// as "configmaps" or "networking.k8s.io/ingresses"): a kind git
// applications render, which DeliverRole then may read, create, patch and
// delete (what a commit no longer renders is pruned).
func ParseAllow(s string) (rbacv1.PolicyRule, error) {
	group, res, ok := strings.Cut(s, "/")
	if !ok {
		group, res = "", s
	}
	if res == "" || strings.ContainsAny(res, "/*") || group == "*" {
		return rbacv1.PolicyRule{}, fmt.Errorf("--allow %q: want resource or group/resource, such as configmaps or networking.k8s.io/ingresses (no wildcards)", s)
	}
	if res != strings.ToLower(res) {
		return rbacv1.PolicyRule{}, fmt.Errorf("--allow %q: resources are lowercase plurals, such as configmaps", s)
	}
	return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{res}, Verbs: []string{"get", "create", "patch", "delete"}}, nil
}

// account is flotilla's ServiceAccount in a cluster, with its namespace
// and its token Secret.
func account(o Options) []runtime.Object {
	no := false
	return []runtime.Object{
		namespace(o.Namespace),
		&corev1.ServiceAccount{
			TypeMeta:                     typeMeta("v1", "ServiceAccount"),
			ObjectMeta:                   objectMeta(o.Namespace, ServiceAccount),
			AutomountServiceAccountToken: &no,
		},
		&corev1.Secret{
			TypeMeta: typeMeta("v1", "Secret"),
			ObjectMeta: func() metav1.ObjectMeta {
				m := objectMeta(o.Namespace, TokenSecret)
				m.Annotations = map[string]string{corev1.ServiceAccountNameKey: ServiceAccount}
				return m
			}(),
			Type: corev1.SecretTypeServiceAccountToken,
		},
	}
}

// identity is flotilla's identity in one fleet cluster: its account,
// ReaderRole bound cluster-wide, DeliverRole bound in every application
// namespace (created when missing).
func identity(o Options, appNamespaces []string) ([]*unstructured.Unstructured, error) {
	sa := subject(o.Namespace)
	objs := append(account(o),
		clusterRole(ReaderRole, ReaderRules),
		clusterRole(DeliverRole, slices.Concat(DeliverRules, o.Allow)),
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
			ObjectMeta: objectMeta("", ReaderRole),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ReaderRole},
			Subjects:   []rbacv1.Subject{sa},
		},
	)
	for _, ns := range appNamespaces {
		objs = append(objs, namespace(ns), &rbacv1.RoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: objectMeta(ns, DeliverRole),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: DeliverRole},
			Subjects:   []rbacv1.Subject{sa},
		})
	}
	return toUnstructured(objs)
}

// accountOnly is flotilla's account alone, for the Tekton cluster outside
// the fleet.
func accountOnly(o Options) ([]*unstructured.Unstructured, error) { return toUnstructured(account(o)) }

// tektonAccess lets flotilla's identity run PipelineRuns in namespace, and
// creates the ServiceAccount the runs use (stepAccount, when set) without
// any rights and without a mounted token: the steps reach the target
// clusters with the kubeconfig Secrets flotilla writes, nothing else.
func tektonAccess(o Options, namespaceName, stepAccount string) ([]*unstructured.Unstructured, error) {
	objs := []runtime.Object{
		namespace(namespaceName),
		&rbacv1.Role{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "Role"),
			ObjectMeta: objectMeta(namespaceName, TektonRole),
			Rules:      TektonRules,
		},
		&rbacv1.RoleBinding{
			TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"),
			ObjectMeta: objectMeta(namespaceName, TektonRole),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: TektonRole},
			Subjects:   []rbacv1.Subject{subject(o.Namespace)},
		},
	}
	if stepAccount != "" {
		no := false
		objs = append(objs, &corev1.ServiceAccount{
			TypeMeta:                     typeMeta("v1", "ServiceAccount"),
			ObjectMeta:                   objectMeta(namespaceName, stepAccount),
			AutomountServiceAccountToken: &no,
		})
	}
	return toUnstructured(objs)
}

func subject(ns string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccount, Namespace: ns}
}

func clusterRole(name string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"),
		ObjectMeta: objectMeta("", name),
		Rules:      rules,
	}
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// Labels marks what bootstrap applies (besides Flagger's own objects, which
// keep Flagger's labels).
var Labels = map[string]string{"app.kubernetes.io/managed-by": "flotilla", "app.kubernetes.io/part-of": "flotilla"}

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Labels: Labels}
}

func toUnstructured(objs []runtime.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("converting %T: %w", o, err)
		}
		u := &unstructured.Unstructured{Object: m}
		// Apply sends no server-set fields.
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
	return out, nil
}
