package main

import (
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// tracker watches the Deployments of the subjects' namespaces in every
// cluster and remembers when each Deployment was first seen with each
// image: the clusters' own word on when a tool changed them, the same way
// for every tool (a watch event reaches the bench a few milliseconds after
// the API server stored the change).
type tracker struct {
	mu    sync.Mutex
	seen  map[string]map[string]time.Time // cluster/ns/name -> image -> first seen
	cur   map[string]string               // cluster/ns/name -> image now
	stops []chan struct{}
}

func key(cluster, ns, name string) string { return cluster + "/" + ns + "/" + name }

func newTracker(kube map[string]kubernetes.Interface, namespaces []string) *tracker {
	t := &tracker{seen: map[string]map[string]time.Time{}, cur: map[string]string{}}
	for cluster, cs := range kube {
		for _, ns := range namespaces {
			stop := make(chan struct{})
			t.stops = append(t.stops, stop)
			f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
			inf := f.Apps().V1().Deployments().Informer()
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(o any) { t.observe(cluster, o) },
				UpdateFunc: func(_, o any) { t.observe(cluster, o) },
			})
			f.Start(stop)
			f.WaitForCacheSync(stop)
		}
	}
	return t
}

func (t *tracker) observe(cluster string, o any) {
	now := time.Now()
	d, ok := o.(*appsv1.Deployment)
	if !ok || len(d.Spec.Template.Spec.Containers) == 0 {
		return
	}
	img := d.Spec.Template.Spec.Containers[0].Image
	k := key(cluster, d.Namespace, d.Name)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cur[k] = img
	if t.seen[k] == nil {
		t.seen[k] = map[string]time.Time{}
	}
	if _, ok := t.seen[k][img]; !ok {
		t.seen[k][img] = now
	}
}

// since is when the Deployment was first seen carrying the version (its tag,
// as Keel writes it, or its digest, as flotilla does), if it was at or
// after from.
func (t *tracker) since(cluster, ns, name, tag, digest string, from time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var first time.Time
	for img, at := range t.seen[key(cluster, ns, name)] {
		if !carries(img, tag, digest) || at.Before(from) {
			continue
		}
		if first.IsZero() || at.Before(first) {
			first = at
		}
	}
	return first, !first.IsZero()
}

func (t *tracker) current(cluster, ns, name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur[key(cluster, ns, name)]
}

// carries tells whether an image reference names the version.
func carries(img, tag, digest string) bool {
	if digest != "" && strings.Contains(img, "@"+digest) {
		return true
	}
	ref, _, _ := strings.Cut(img, "@")
	return strings.HasSuffix(ref, ":"+tag)
}

func (t *tracker) stop() {
	for _, s := range t.stops {
		close(s)
	}
}
