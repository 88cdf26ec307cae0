package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// FieldManager owns the fields bootstrap applies.
const FieldManager = "flotilla-bootstrap"

// Apply applies a target's objects in order and tells what each one did; a
// dry run changes nothing and tells what it would do. It stops at the first
// object that fails. Objects of t.Replace may be replaced (apply).
func Apply(ctx context.Context, a Applier, t Target, dryRun bool) ([]Result, error) {
	var out []Result
	for _, o := range t.Objects {
		act, err := apply(ctx, a, o, dryRun, slices.Contains(t.Replace, RefOf(o)))
		if err != nil {
			return out, fmt.Errorf("cluster %s: %w", t.Name, err)
		}
		out = append(out, Result{Cluster: t.Name, Object: RefOf(o), Action: act})
	}
	return out, nil
}

// State is how an object of a target stands in its cluster.
type State string

// States.
const (
	OK       State = "ok"
	Missing  State = "missing"
	Outdated State = "outdated"
	// NotReady is a Deployment that is there and current but not available.
	NotReady State = "not ready"
)

// Finding is one object's State, with what differs when Outdated.
type Finding struct {
	Cluster string
	Object  Ref
	State   State
	Detail  string
}

// Check compares a target's objects with its cluster: missing, outdated (the
// server would store something else if bootstrap applied it: asked with a
// dry run, so Check needs bootstrap's rights but changes nothing), or, for a
// Deployment, not available. An object of t.Replace bootstrap would replace
// is Outdated.
func Check(ctx context.Context, a Applier, t Target) ([]Finding, error) {
	var out []Finding
	for _, o := range t.Objects {
		f := Finding{Cluster: t.Name, Object: RefOf(o), State: OK}
		cur, err := a.Get(ctx, o)
		switch {
		case apierrors.IsNotFound(err):
			f.State = Missing
			out = append(out, f)
			continue
		case err != nil:
			return out, fmt.Errorf("cluster %s: reading %s: %w", t.Name, f.Object, err)
		}
		want, err := a.ApplyObject(ctx, o, true)
		switch {
		case err != nil && slices.Contains(t.Replace, f.Object) && replaceable(cur, err):
			f.State, f.Detail = Outdated, "another installer's, which the server refuses to change in place: bootstrap would replace it"
			out = append(out, f)
			continue
		case err != nil:
			return out, fmt.Errorf("cluster %s: %w", t.Name, err)
		}
		if d := diff(strip(cur), strip(want), ""); d != "" {
			f.State, f.Detail = Outdated, d
		} else if o.GetKind() == "Deployment" && !available(cur) {
			f.State, f.Detail = NotReady, "no available replica yet"
		}
		out = append(out, f)
	}
	return out, nil
}

// Ready tells whether every finding is OK.
func Ready(fs []Finding) bool {
	return !slices.ContainsFunc(fs, func(f Finding) bool { return f.State != OK })
}

// available reads a Deployment's Available condition, for its current
// generation.
func available(d *unstructured.Unstructured) bool {
	gen, _, _ := unstructured.NestedInt64(d.Object, "status", "observedGeneration")
	if gen < d.GetGeneration() {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(d.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// TokenWait bounds the wait for the token controller to fill flotilla's
// token Secret.
const TokenWait = time.Minute

// Kubeconfig waits for the token of flotilla's ServiceAccount (in
// namespace) and renders a kubeconfig that reaches the cluster as admin
// does (server, CA) but authenticates with that token only.
func Kubeconfig(ctx context.Context, admin *rest.Config, namespace string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	var token string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, TokenWait, true, func(ctx context.Context) (bool, error) {
		s, err := cs.CoreV1().Secrets(namespace).Get(ctx, TokenSecret, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet (a dry run, or just applied): keep waiting
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the token in Secret %s/%s (does the cluster run its token controller?): %w", namespace, TokenSecret, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	return kube.Kubeconfig(cfg)
}
