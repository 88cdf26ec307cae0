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
// cluster and remembers each change of each Deployment's image and when it
// was seen: the clusters' own word on when a tool changed them, the same way
// for every tool (a watch event reaches the bench a few milliseconds after
// the API server stored the change).
type tracker struct {
	mu    sync.Mutex
	hist  map[string][]change // cluster/ns/name -> its images, in order
	stops []chan struct{}
}

// change is a Deployment seen with a new image.
type change struct {
	image string
	at    time.Time
}

func key(cluster, ns, name string) string { return cluster + "/" + ns + "/" + name }

func newTracker(kube map[string]kubernetes.Interface, namespaces []string) *tracker {
	t := &tracker{hist: map[string][]change{}}
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
	t.hist[k] = record(t.hist[k], img, now)
}

// record appends the image to a Deployment's history if it changed.
func record(h []change, img string, at time.Time) []change {
	if len(h) > 0 && h[len(h)-1].image == img {
		return h
	}
	return append(h, change{image: img, at: at})
}

// firstSince is when the history first changed to an image carrying the
// version (its tag, as Keel and Flux write it, or its digest, as flotilla
// does) at or after from.
func firstSince(h []change, tag, digest string, from time.Time) (time.Time, bool) {
	for _, c := range h {
		if !c.at.Before(from) && carries(c.image, tag, digest) {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// since is when the Deployment was first seen changed to the version at or
// after from.
func (t *tracker) since(cluster, ns, name, tag, digest string, from time.Time) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return firstSince(t.hist[key(cluster, ns, name)], tag, digest, from)
}

// history is a copy of the Deployment's changes.
func (t *tracker) history(cluster, ns, name string) []change {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]change(nil), t.hist[key(cluster, ns, name)]...)
}

// current is the Deployment's image now.
func (t *tracker) current(cluster, ns, name string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.hist[key(cluster, ns, name)]
	if len(h) == 0 {
		return ""
	}
	return h[len(h)-1].image
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
