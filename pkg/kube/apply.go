package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
)

// Decode splits a multi-document YAML (or JSON) stream into objects, skipping
// empty documents.
func Decode(manifests []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decoding manifest %d: %w", len(objs)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// Applier applies objects to one cluster with server-side apply.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
	owner  string
}

// NewApplier returns an Applier that applies as field manager owner.
func NewApplier(cfg *rest.Config, owner string) (*Applier, error) {
	// CRDs of Flagger and Tekton draw harmless "unrecognized format" warnings.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NoWarnings{}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), owner: owner}, nil
}

// Apply applies every object in order. A kind the server does not know yet is
// retried once after refreshing discovery (its CRD may have just been applied).
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := a.applyOne(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (a *Applier) applyOne(ctx context.Context, o *unstructured.Unstructured) error {
	_, err := a.ApplyObject(ctx, o, false)
	return err
}

// mapping maps a kind to its resource. A kind the server does not know yet
// is retried once after refreshing discovery.
func (a *Applier) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		a.mapper.Reset()
		m, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", gvk, err)
	}
	return m, nil
}

// resource is the client of o's resource, in o's namespace (default
// "default") when the resource is namespaced.
func (a *Applier) resource(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	m, err := a.mapping(o.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource), nil
	}
	ns := o.GetNamespace()
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return a.dyn.Resource(m.Resource).Namespace(ns), nil
}

// ApplyObject applies one object (server-side apply, forcing ownership of
// the fields it sets) and returns the object as the server stored it, or,
// with dryRun, as it would store it.
func (a *Applier) ApplyObject(ctx context.Context, o *unstructured.Unstructured, dryRun bool) (*unstructured.Unstructured, error) {
	ri, err := a.resource(o)
	if err != nil {
		return nil, err
	}
	body, err := o.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encoding %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: a.owner, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	out, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, opts)
	if err != nil {
		return nil, fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return out, nil
}

// Get reads the object o names (its kind, namespace and name) from the
// server; a missing object is an error apierrors.IsNotFound recognises, and
// so is a kind the server does not serve.
func (a *Applier) Get(ctx context.Context, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := a.resource(o)
	if meta.IsNoMatchError(err) {
		gvk := o.GroupVersionKind()
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, o.GetName())
	}
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, o.GetName(), metav1.GetOptions{})
}

// Delete deletes the object o names, in the foreground: the server removes
// what it owns first (a Deployment's ReplicaSets and pods), so the object
// is gone only once they are. When o carries a UID, only that object is
// deleted, not one created since under its name.
func (a *Applier) Delete(ctx context.Context, o *unstructured.Unstructured) error {
	ri, err := a.resource(o)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
	if uid := o.GetUID(); uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := ri.Delete(ctx, o.GetName(), opts); err != nil {
		return fmt.Errorf("deleting %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// List lists the objects of a kind (apiVersion, kind) in every namespace.
func (a *Applier) List(ctx context.Context, apiVersion, kind string) ([]unstructured.Unstructured, error) {
	m, err := a.mapping(schema.FromAPIVersionAndKind(apiVersion, kind))
	if err != nil {
		return nil, err
	}
	l, err := a.dyn.Resource(m.Resource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", m.Resource.Resource, err)
	}
	return l.Items, nil
}

// WaitCRDsEstablished waits until every named CRD reports Established.
func WaitCRDsEstablished(ctx context.Context, cfg *rest.Config, names ...string) error {
	cs, err := apiextclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("creating apiextensions client: %w", err)
	}
	for _, name := range names {
		err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // not created yet: keep waiting
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s: %w", name, err)
		}
	}
	return nil
}
