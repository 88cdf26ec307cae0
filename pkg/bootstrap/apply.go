package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Action is what bootstrap did, or would do, to one object.
type Action string

// Actions.
const (
	Created    Action = "created"
	Configured Action = "configured"
	Unchanged  Action = "unchanged"
	// Replaced is another installer's object deleted and created again as
	// bootstrap's, where the server refused to change it in place
	// (Target.Replace).
	Replaced Action = "replaced"
	// WouldCreate, WouldConfigure and WouldReplace are dry runs' Created,
	// Configured and Replaced.
	WouldCreate    Action = "would create"
	WouldConfigure Action = "would configure"
	WouldReplace   Action = "would replace"
)

// Result is one object's Action.
type Result struct {
	Cluster string
	Object  Ref
	Action  Action
}

// Ref names an object.
type Ref struct {
	Kind, Namespace, Name string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

// RefOf names o.
func RefOf(o *unstructured.Unstructured) Ref {
	return Ref{Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// Applier is what bootstrap needs of a cluster: pkg/kube's Applier.
type Applier interface {
	Get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error)
	ApplyObject(ctx context.Context, o *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error)
	// Delete deletes the object o names (only the one of o's UID, when o
	// has one) and what it owns.
	Delete(ctx context.Context, o *unstructured.Unstructured) error
}

// ReplaceWait bounds the wait for an object bootstrap replaces to be gone.
const ReplaceWait = 2 * time.Minute

// apply applies o (server-side, field manager FieldManager) and tells what
// changed, comparing the object before and after. A dry run asks the server
// what it would store (dryRun=All) and compares; for a missing object it
// asks nothing, since its namespace or CRD may not be there yet either.
// With mayReplace, another installer's Flagger the server refuses to change
// in place is replaced (replaceable, replace).
func apply(ctx context.Context, a Applier, o *unstructured.Unstructured, dryRun, mayReplace bool) (Action, error) {
	cur, err := a.Get(ctx, o)
	switch {
	case apierrors.IsNotFound(err):
		if dryRun {
			return WouldCreate, nil
		}
		if _, err := a.ApplyObject(ctx, o, false); err != nil {
			return "", err
		}
		return Created, nil
	case err != nil:
		return "", fmt.Errorf("reading %s: %w", RefOf(o), err)
	}
	out, err := a.ApplyObject(ctx, o, dryRun)
	if err != nil && mayReplace && replaceable(cur, err) {
		return replace(ctx, a, cur, o, dryRun)
	}
	if err != nil {
		return "", err
	}
	switch {
	// A controller writing the object's status between the read and the
	// apply moves its resourceVersion: compare what bootstrap owns. (The
	// Deployment controller's revision annotation lands on a Deployment
	// just created: labels and annotations bootstrap does not set are
	// left out too.)
	case same(ownMeta(cur, o), ownMeta(out, o)):
		return Unchanged, nil
	case dryRun:
		return WouldConfigure, nil
	default:
		return Configured, nil
	}
}

// replace deletes cur, waits until it is gone (with what it owns: a
// Deployment's pods, so two Flaggers never run at once) and creates o in its
// place, as kubectl apply --force does. A dry run changes nothing.
func replace(ctx context.Context, a Applier, cur, o *unstructured.Unstructured, dryRun bool) (Action, error) {
	if dryRun {
		return WouldReplace, nil
	}
	if err := a.Delete(ctx, cur); err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, ReplaceWait, true, func(ctx context.Context) (bool, error) {
		now, err := a.Get(ctx, cur)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && now.GetUID() != cur.GetUID(), err
	})
	if err != nil {
		return "", fmt.Errorf("waiting for %s to be deleted, to replace it: %w", RefOf(cur), err)
	}
	if _, err := a.ApplyObject(ctx, o, false); err != nil {
		return "", err
	}
	return Replaced, nil
}

// same compares two versions of an object, leaving out what bootstrap does
// not apply and the server changes on its own (status, resourceVersion,
// managedFields' timestamps).
func same(a, b *unstructured.Unstructured) bool {
	return diff(strip(a), strip(b), "") == ""
}

// ownMeta is o without the labels and annotations applied does not set.
func ownMeta(o, applied *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	c.SetLabels(only(c.GetLabels(), applied.GetLabels()))
	c.SetAnnotations(only(c.GetAnnotations(), applied.GetAnnotations()))
	return c
}

// only is m's entries whose keys want has.
func only(m, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if _, ok := want[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func strip(o *unstructured.Unstructured) map[string]any {
	c := o.DeepCopy()
	c.SetManagedFields(nil)
	c.SetResourceVersion("")
	// A changed spec moves the generation too: name the spec's field.
	c.SetGeneration(0)
	unstructured.RemoveNestedField(c.Object, "status")
	return c.Object
}

// diff names the first path where a and b differ ("" when equal).
func diff(a, b any, path string) string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return cmpOr(path, ".")
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range slices.Compact(keys) {
			if d := diff(av[k], bv[k], path+"."+k); d != "" {
				return d
			}
		}
		return ""
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return cmpOr(path, ".")
		}
		for i := range av {
			if d := diff(av[i], bv[i], fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	default:
		if equality.Semantic.DeepEqual(a, b) {
			return ""
		}
		return cmpOr(path, ".")
	}
}

func cmpOr(path, root string) string {
	if path == "" {
		return root
	}
	return path
}
