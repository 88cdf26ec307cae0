package cluster

import (
	"context"
	"fmt"
	"strings"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// What an application runs in a cluster, for the check of the clusters
// against the validated digest (pkg/reconcile): whether its workload and
// its canary exist, and what Flagger's primary runs. Read from the watch
// cache of the namespace once synced (the first read starts it), live
// until then. The watch caches also tell a callback (OnPrimaryChange)
// when a primary's image changes or a primary or canary goes, so a change
// by hand is seen within the watch's milliseconds, not at the next check.

// Observe reads what application workload w runs in a cluster's namespace.
func (s *Set) Observe(ctx context.Context, clusterName, namespace string, w config.Workload) (rollout.Observed, error) {
	o := rollout.Observed{Cluster: clusterName}
	if nc, err := s.namespaceCache(clusterName, namespace); err == nil && nc.ready() {
		cn, err := nc.canaries.Canaries(namespace).Get(w.Name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return o, err
		case cn.DeletionTimestamp != nil:
			return o, errBeingDeleted(namespace, w.Name, clusterName)
		default:
			o.Canary = true
		}
		target, err := nc.image(namespace, w.Kind, w.Name, w.Container)
		if err != nil && !apierrors.IsNotFound(err) {
			return o, err
		}
		o.Workload = target != ""
		primary, err := nc.template(namespace, w.Kind, w.Name+"-primary")
		if err != nil {
			return o, err
		}
		setPrimary(&o, primary, w.Container)
		o.Generation = nc.generation(namespace, w.Kind, w.Name+"-primary")
		return o, nil
	}
	c, err := s.clientsFor(clusterName)
	if err != nil {
		return o, err
	}
	cn, err := c.flagger.FlaggerV1beta1().Canaries(namespace).Get(ctx, w.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return o, fmt.Errorf("reading canary %s/%s in %s: %w", namespace, w.Name, clusterName, err)
	case cn.DeletionTimestamp != nil:
		return o, errBeingDeleted(namespace, w.Name, clusterName)
	default:
		o.Canary = true
	}
	target, err := image(ctx, c, namespace, w.Kind, w.Name, w.Container)
	if err != nil {
		return o, err
	}
	o.Workload = target != ""
	primary, err := template(ctx, c, namespace, w.Kind, w.Name+"-primary")
	if err != nil {
		return o, err
	}
	setPrimary(&o, primary, w.Container)
	o.Generation = liveGeneration(ctx, c, namespace, w.Kind, w.Name+"-primary")
	return o, nil
}

// generation is a cached workload's metadata.generation, 0 when it is
// not there.
func (c *nsCache) generation(namespace, kind, name string) int64 {
	if kindOf(kind) == config.KindDaemonSet {
		if d, err := c.daemonsets.DaemonSets(namespace).Get(name); err == nil {
			return d.Generation
		}
		return 0
	}
	if d, err := c.deployments.Deployments(namespace).Get(name); err == nil {
		return d.Generation
	}
	return 0
}

// liveGeneration is a workload's metadata.generation read live, 0 when it
// cannot be read.
func liveGeneration(ctx context.Context, c *clients, namespace, kind, name string) int64 {
	if kindOf(kind) == config.KindDaemonSet {
		if d, err := c.kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			return d.Generation
		}
		return 0
	}
	if d, err := c.kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
		return d.Generation
	}
	return 0
}

// errBeingDeleted: a canary on its way out (its primary going first) is
// neither there nor gone yet; its deletion's end is seen again.
func errBeingDeleted(namespace, name, cluster string) error {
	return fmt.Errorf("canary %s/%s in %s is being deleted", namespace, name, cluster)
}

// OnPrimaryChange has the watch caches call fn(cluster, namespace,
// workload) when the primary of a workload (<workload>-primary) changes
// its containers' images or goes, or its canary goes. Set it before the
// first read; fn must not block.
func (s *Set) OnPrimaryChange(fn func(cluster, namespace, workload string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.primaryChanged = fn
}

// watchPrimaries adds the OnPrimaryChange callback, if any, to the
// informers of a namespace's cache. Called with s.mu held.
func (s *Set) watchPrimaries(clusterName string, canaries, deployments cache.SharedIndexInformer) {
	fn := s.primaryChanged
	if fn == nil {
		return
	}
	primary := func(obj any) (*appsv1.Deployment, bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		d, ok := obj.(*appsv1.Deployment)
		return d, ok && strings.HasSuffix(d.Name, "-primary")
	}
	_, _ = deployments.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			was, ok1 := primary(oldObj)
			now, ok2 := primary(newObj)
			if ok1 && ok2 && !sameImages(was, now) {
				fn(clusterName, now.Namespace, strings.TrimSuffix(now.Name, "-primary"))
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := primary(obj); ok {
				fn(clusterName, d.Namespace, strings.TrimSuffix(d.Name, "-primary"))
			}
		},
	})
	_, _ = canaries.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if cn, ok := obj.(*flaggerv1.Canary); ok {
				fn(clusterName, cn.Namespace, cn.Name)
			}
		},
	})
}

// sameImages tells whether two Deployments' containers run the same images.
func sameImages(a, b *appsv1.Deployment) bool {
	x, y := a.Spec.Template.Spec.Containers, b.Spec.Template.Spec.Containers
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].Image != y[i].Image {
			return false
		}
	}
	return true
}

// setPrimary records what the primary's pod template runs: its revision
// (a git application's repository@commit, else the container's image) and
// its container's image (held against what a git application's commit
// renders). A nil template is no primary.
func setPrimary(o *rollout.Observed, pod *corev1.PodTemplateSpec, container string) {
	if pod == nil {
		return
	}
	o.Primary, o.PrimaryImage = revision(*pod, container), containerImage(pod.Spec, container)
}
