package prune

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// Clusters gives the client configuration of each cluster of the fleet
// (pkg/cluster.Set).
type Clusters interface {
	Config(name string) (*rest.Config, error)
}

// Options tune Prune.
type Options struct {
	// Logger receives a line per object deleted. Default: discard.
	Logger *slog.Logger
	// Namespaces limits the prune to these namespaces. Default: all.
	Namespaces []string
	// MaxParallel bounds the clusters pruned at once. Default
	// DefaultMaxParallel.
	MaxParallel int
	// Timeout bounds the work in one cluster, so that one that does not
	// answer holds up the others no longer. Default DefaultTimeout.
	Timeout time.Duration
}

// Defaults of Options.
const (
	DefaultMaxParallel = 16
	DefaultTimeout     = 10 * time.Second
)

// Why an object was deleted.
const (
	ReasonApplicationRemoved = "application no longer configured"
	ReasonNotRendered        = "no longer part of the application's delivery policy"
)

// Object is an object Prune deleted.
type Object struct {
	APIVersion, Kind, Namespace, Name string
	// Application is the object's flotilla.dev/application label.
	Application string
	// Reason is ReasonApplicationRemoved or ReasonNotRendered.
	Reason string
}

func (o Object) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// Report is what Prune deleted, by cluster name. A cluster where nothing was
// deleted has no entry.
type Report struct {
	Deleted map[string][]Object
}

// Prune deletes, in every cluster of cfg's fleet, the objects flotilla
// created that cfg no longer renders (see the package documentation). cfg
// must be valid, as config.Load returns it. A cluster that cannot be reached
// or listed does not stop the others: Prune goes on, and returns what it
// deleted with every cluster's error joined.
func Prune(ctx context.Context, cfg *config.Config, clusters Clusters, o Options) (Report, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	want, err := rendered(cfg)
	if err != nil {
		return Report{}, err
	}
	var (
		mu   sync.Mutex
		rep  = Report{Deleted: map[string][]Object{}}
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, o.MaxParallel)
	)
	for _, c := range cfg.Fleet.Clusters {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			deleted, err := pruneCluster(ctx, c.Name, clusters, want, o)
			mu.Lock()
			defer mu.Unlock()
			if len(deleted) > 0 {
				rep.Deleted[c.Name] = deleted
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("pruning cluster %s: %w", c.Name, err))
			}
		})
	}
	wg.Wait()
	return rep, errors.Join(errs...)
}

// key names an object whatever the version it is read at.
type key struct {
	kind            schema.GroupKind
	namespace, name string
}

// wanted is what the config renders: the objects to keep, and the
// applications configured.
type wanted struct {
	instance     string
	objects      map[key]bool
	applications map[string]bool
}

// rendered renders every application of cfg. Names depend on neither the
// cluster nor the rollout, so one rendering serves the whole fleet.
func rendered(cfg *config.Config) (wanted, error) {
	w := wanted{instance: cfg.Server.Instance, objects: map[key]bool{}, applications: map[string]bool{}}
	for _, app := range cfg.Applications {
		w.applications[app.Name] = true
		for _, obj := range canary.Render(app, canary.Input{Instance: cfg.Server.Instance}).List() {
			m, err := meta.Accessor(obj)
			if err != nil {
				return wanted{}, fmt.Errorf("rendering application %s: %w", app.Name, err)
			}
			gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
			if gk.Kind == "" {
				// Without its kind it would match nothing listed, and be deleted.
				return wanted{}, fmt.Errorf("rendering application %s: %T %s has no kind", app.Name, obj, m.GetName())
			}
			w.objects[key{gk, m.GetNamespace(), m.GetName()}] = true
		}
	}
	return w, nil
}

// stale tells whether u is flotilla's and no longer wanted, and why.
func (w wanted) stale(u *unstructured.Unstructured) (reason string, ok bool) {
	l := u.GetLabels()
	app := l[canary.LabelApplication]
	switch {
	case l[canary.LabelManagedBy] != canary.ManagedBy || app == "":
		return "", false // not flotilla's
	case metav1.GetControllerOfNoCopy(u) != nil:
		return "", false // made by its controller, from one of flotilla's
	case u.GetDeletionTimestamp() != nil:
		return "", false // on its way out already
	case w.objects[key{u.GroupVersionKind().GroupKind(), u.GetNamespace(), u.GetName()}]:
		return "", false
	case !w.applications[app]:
		return ReasonApplicationRemoved, true
	default:
		return ReasonNotRendered, true
	}
}

// selector selects this flotilla's objects, whatever their application.
// Objects of another instance, or made before instances were labelled, are
// never listed.
func selector(instance string) string {
	return canary.LabelManagedBy + "=" + canary.ManagedBy + "," + canary.LabelApplication + "," + canary.LabelInstance + "=" + instance
}

func pruneCluster(ctx context.Context, name string, clusters Clusters, want wanted, o Options) ([]Object, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rc, err := clusters.Config(name)
	if err != nil {
		return nil, err
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var (
		deleted []Object
		errs    []error
	)
	// OwnedResources lists Canaries first: Flagger starts finalizing a
	// Canary while the rest goes.
	for _, gvr := range canary.OwnedResources {
		for _, ns := range namespaces {
			items, err := list(ctx, dc.Resource(gvr).Namespace(ns), want.instance)
			if apierrors.IsNotFound(err) {
				continue // not served here (no Flagger CRDs): nothing of it to prune
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("listing %s: %w", gvr.Resource, err))
				continue
			}
			for _, u := range items {
				reason, ok := want.stale(&u)
				if !ok {
					continue
				}
				obj := Object{
					APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
					Application: u.GetLabels()[canary.LabelApplication], Reason: reason,
				}
				err := dc.Resource(gvr).Namespace(obj.Namespace).Delete(ctx, obj.Name, metav1.DeleteOptions{
					PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
					// Only the object listed: not one made again since.
					Preconditions: &metav1.Preconditions{UID: ptr.To(u.GetUID())},
				})
				switch {
				case apierrors.IsNotFound(err), apierrors.IsConflict(err):
					continue // gone or replaced meanwhile
				case err != nil:
					errs = append(errs, fmt.Errorf("deleting %s: %w", obj, err))
					continue
				}
				o.Logger.InfoContext(ctx, "pruned", "cluster", name, "kind", obj.Kind, "namespace", obj.Namespace,
					"name", obj.Name, "application", obj.Application, "reason", reason)
				deleted = append(deleted, obj)
			}
		}
	}
	return deleted, errors.Join(errs...)
}

// list lists flotilla's objects of ri, page by page.
func list(ctx context.Context, ri dynamic.ResourceInterface, instance string) ([]unstructured.Unstructured, error) {
	var items []unstructured.Unstructured
	opts := metav1.ListOptions{LabelSelector: selector(instance), Limit: 500}
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		items = append(items, l.Items...)
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return items, nil
		}
	}
}
