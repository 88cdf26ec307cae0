package features

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cucumber/godog"
)

// The steps here judge the controls from the clusters (#32): a step starts
// watching the scenario's Deployments (workloads and primaries) and
// Canaries in some clusters, as their API servers report every change, and
// later steps read what the clusters went through: nothing while a hold
// lasted, then the new version once it was released. Flotilla's own API may
// say "Pending" while it applies a held wave; the clusters cannot.

func (s *scenario) registerClusterWatchSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application's objects in clusters "([^"]*)" are watched$`, s.watchObjects)
	sc.Step(`^clusters "([^"]*)" were unchanged until the release$`, s.unchangedUntilRelease)
	sc.Step(`^clusters "([^"]*)" are unchanged while watched$`, s.unchangedWhileWatched)
	sc.Step(`^no primary in clusters "([^"]*)" ran version "([^"]*)" while watched$`, s.primaryNeverRan)
	sc.Step(`^no watched cluster takes version "([^"]*)" for (\d+) seconds$`, s.noClusterTakes)
	sc.Step(`^the workload in cluster "([^"]*)" came back to version "([^"]*)" only after the primary in cluster "([^"]*)" did$`, s.cameBackAfter)
}

// clusterWatch is what the watched clusters' API servers reported of the
// scenario's Deployments and Canaries: each object's states, oldest first;
// the first state of an object that existed when the watch started is the
// one listed then. release is when a step released the hold (the last one:
// resume, an approval, fleet start, an override, a freeze window's end).
type clusterWatch struct {
	mu       sync.Mutex
	started  time.Time
	clusters []string
	objects  map[string][]objectState // "cluster Kind name"
	err      error                    // a watch that failed
	release  time.Time
}

// objectState is what the checks compare of one object: a Deployment's
// spec generation, image and annotations (flotilla's rollout annotations
// are in its metadata, which no generation counts), a Canary's too and
// the phase and specs Flagger reports. at is when the watch heard of it.
type objectState struct {
	at          time.Time
	listed      bool // as the watch's first list saw it
	gone        bool
	generation  int64
	image       string
	annotations string
	phase       string
	applied     string
	promoted    string
}

func (o objectState) same(p objectState) bool {
	o.at, p.at, o.listed, p.listed = time.Time{}, time.Time{}, false, false
	return o == p
}

func (o objectState) String() string {
	if o.gone {
		return "deleted"
	}
	s := fmt.Sprintf("generation %d", o.generation)
	if o.image != "" {
		s += ", image " + o.image
	}
	if o.phase != "" {
		s += ", phase " + o.phase
	}
	return s + ", annotations {" + o.annotations + "}"
}

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	canariesGVR    = schema.GroupVersionResource{Group: "flagger.app", Version: "v1beta1", Resource: "canaries"}
)

// stateOf reads an object's state.
func stateOf(u *unstructured.Unstructured, at time.Time) objectState {
	st := objectState{at: at, generation: u.GetGeneration()}
	ann := map[string]string{}
	for k, v := range u.GetAnnotations() {
		if k != "deployment.kubernetes.io/revision" { // follows the generation
			ann[k] = v
		}
	}
	tmpl, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
	for k, v := range tmpl {
		ann["template:"+k] = v
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		kv = append(kv, k+"="+ann[k])
	}
	st.annotations = strings.Join(kv, ", ")
	if cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers"); len(cs) > 0 {
		if c, ok := cs[0].(map[string]any); ok {
			st.image, _ = c["image"].(string)
		}
	}
	st.phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	st.applied, _, _ = unstructured.NestedString(u.Object, "status", "lastAppliedSpec")
	st.promoted, _, _ = unstructured.NestedString(u.Object, "status", "lastPromotedSpec")
	return st
}

// watch returns the scenario's clusterWatch, made (not yet watching) when
// a step records a release before any watch started.
func (s *scenario) watch() *clusterWatch {
	if s.w.watch == nil {
		s.w.watch = &clusterWatch{objects: map[string][]objectState{}}
	}
	return s.w.watch
}

// released records that a step released the hold at t.
func (s *scenario) released(t time.Time) {
	cw := s.watch()
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.release = t
}

// watchObjects lists, then watches (a RetryWatcher from the list's
// resource version: no change in between is missed), the Deployments and
// Canaries of the scenario's namespace in each named cluster, until the
// scenario ends.
func (s *scenario) watchObjects(ctx context.Context, names string) error {
	cw := s.watch()
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.onCleanup(cancel)
	cw.mu.Lock()
	cw.started = time.Now()
	cw.mu.Unlock()
	for _, n := range strings.Split(names, ",") {
		c, err := s.clientsFor(n)
		if err != nil {
			return err
		}
		for kind, gvr := range map[string]schema.GroupVersionResource{"Deployment": deploymentsGVR, "Canary": canariesGVR} {
			ri := c.Dynamic.Resource(gvr).Namespace(s.w.namespace)
			list, err := ri.List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("listing %s in %s: %w", gvr.Resource, n, err)
			}
			now := time.Now()
			cw.mu.Lock()
			for i := range list.Items {
				key := n + " " + kind + " " + list.Items[i].GetName()
				st := stateOf(&list.Items[i], now)
				st.listed = true
				cw.objects[key] = append(cw.objects[key], st)
			}
			cw.mu.Unlock()
			rw, err := watchtools.NewRetryWatcherWithContext(wctx, list.GetResourceVersion(), &cache.ListWatch{
				WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return ri.Watch(ctx, o) },
			})
			if err != nil {
				return fmt.Errorf("watching %s in %s: %w", gvr.Resource, n, err)
			}
			go cw.follow(wctx, rw, n, kind)
		}
		cw.mu.Lock()
		cw.clusters = append(cw.clusters, n)
		cw.mu.Unlock()
	}
	return nil
}

// follow records each change rw reports until ctx ends.
func (cw *clusterWatch) follow(ctx context.Context, rw *watchtools.RetryWatcher, cluster, kind string) {
	defer rw.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-rw.ResultChan():
			now := time.Now()
			cw.mu.Lock()
			switch {
			case !ok:
				if ctx.Err() == nil && cw.err == nil {
					cw.err = fmt.Errorf("the watch of %s objects in %s ended", kind, cluster)
				}
				cw.mu.Unlock()
				return
			case ev.Type == watch.Error:
				if cw.err == nil {
					cw.err = fmt.Errorf("the watch of %s objects in %s failed: %v", kind, cluster, ev.Object)
				}
			default:
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Bookmark {
					st := stateOf(u, now)
					st.gone = ev.Type == watch.Deleted
					key := cluster + " " + kind + " " + u.GetName()
					cw.objects[key] = append(cw.objects[key], st)
				}
			}
			cw.mu.Unlock()
		}
	}
}

// firstChange is the first change the watch saw in cluster before until,
// as an error; nil if nothing changed. An object that was not there when
// the watch started and appeared changed (a Canary created, say).
func (cw *clusterWatch) firstChange(cluster string, until time.Time) error {
	var first error
	var firstAt time.Time
	note := func(key, change string, at time.Time) {
		if first == nil || at.Before(firstAt) {
			first, firstAt = fmt.Errorf("%s %s at %s", key, change, at.Format(time.StampMilli)), at
		}
	}
	for key, states := range cw.objects {
		if !strings.HasPrefix(key, cluster+" ") {
			continue
		}
		base := states[0]
		if !base.listed {
			if base.at.Before(until) {
				note(key, "appeared: "+base.String(), base.at)
			}
			continue
		}
		for _, st := range states[1:] {
			if !st.at.Before(until) {
				break
			}
			if !st.same(base) {
				note(key, fmt.Sprintf("changed to %s (was %s)", st, base), st.at)
				break
			}
		}
	}
	return first
}

// unchanged checks that nothing changed in the named clusters, all of them
// watched, before until.
func (s *scenario) unchanged(names string, until time.Time) error {
	cw := s.w.watch
	if cw == nil || cw.started.IsZero() {
		return fmt.Errorf("no step watched the clusters")
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.err != nil {
		return cw.err
	}
	for _, n := range strings.Split(names, ",") {
		if !slices.Contains(cw.clusters, n) {
			return fmt.Errorf("cluster %s is not watched", n)
		}
		if err := cw.firstChange(n, until); err != nil {
			return fmt.Errorf("cluster %s changed while held (watched since %s): %w", n, cw.started.Format(time.StampMilli), err)
		}
	}
	return nil
}

func (s *scenario) unchangedUntilRelease(names string) error {
	cw := s.watch()
	cw.mu.Lock()
	release := cw.release
	cw.mu.Unlock()
	if release.IsZero() || release.After(time.Now()) {
		return fmt.Errorf("the hold has not been released yet (release: %v)", release)
	}
	if err := s.unchanged(names, release); err != nil {
		return err
	}
	// The release changed each of them, and the watch saw it: a watch
	// that heard nothing would pass the check above.
	cw.mu.Lock()
	defer cw.mu.Unlock()
	for _, n := range strings.Split(names, ",") {
		if cw.firstChange(n, time.Now()) == nil {
			return fmt.Errorf("the watch saw nothing change in cluster %s after the release at %s", n, release.Format(time.StampMilli))
		}
	}
	return nil
}

func (s *scenario) unchangedWhileWatched(names string) error {
	return s.unchanged(names, time.Now())
}

// watchedStates are the states of one watched object, "cluster Kind name".
func (s *scenario) watchedStates(cluster, kind, name string) ([]objectState, error) {
	cw := s.w.watch
	if cw == nil || cw.started.IsZero() {
		return nil, fmt.Errorf("no step watched the clusters")
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.err != nil {
		return nil, cw.err
	}
	if !slices.Contains(cw.clusters, cluster) {
		return nil, fmt.Errorf("cluster %s is not watched", cluster)
	}
	return slices.Clone(cw.objects[cluster+" "+kind+" "+name]), nil
}

// primaryNeverRan checks that no state the watch saw of the primary in
// the named clusters ran version's digest.
func (s *scenario) primaryNeverRan(names, version string) error {
	ref, err := s.ref(version)
	if err != nil {
		return err
	}
	for _, n := range strings.Split(names, ",") {
		states, err := s.watchedStates(n, "Deployment", s.w.workload+"-primary")
		if err != nil {
			return err
		}
		for _, st := range states {
			if st.image == ref {
				return fmt.Errorf("the primary in %s ran version %s (%s) at %s", n, version, ref, st.at.Format(time.StampMilli))
			}
		}
	}
	return nil
}

// noClusterTakes watches for seconds, then checks that no Deployment in
// any watched cluster ran version's digest at any time while watched.
func (s *scenario) noClusterTakes(ctx context.Context, version string, seconds int) error {
	ref, err := s.ref(version)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(seconds) * time.Second):
	}
	cw := s.w.watch
	if cw == nil || cw.started.IsZero() {
		return fmt.Errorf("no step watched the clusters")
	}
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.err != nil {
		return cw.err
	}
	for key, states := range cw.objects {
		for _, st := range states {
			if st.image == ref {
				return fmt.Errorf("%s ran version %s (%s) at %s", key, version, ref, st.at.Format(time.StampMilli))
			}
		}
	}
	return nil
}

// cameBack is when states came back to image ref: the first state that
// runs it after one that does not (zero: never).
func cameBack(states []objectState, ref string) time.Time {
	for i := 1; i < len(states); i++ {
		if states[i].image == ref && states[i-1].image != ref {
			return states[i].at
		}
	}
	return time.Time{}
}

// cameBackAfter checks an order the clusters' API servers saw: the
// workload in cluster came back to version only after the primary in
// other had (a rollback reverts the newest wave first, and the next once
// it is reverted).
func (s *scenario) cameBackAfter(cluster, version, other string) error {
	ref, err := s.ref(version)
	if err != nil {
		return err
	}
	primary, err := s.watchedStates(other, "Deployment", s.w.workload+"-primary")
	if err != nil {
		return err
	}
	back := cameBack(primary, ref)
	if back.IsZero() {
		return fmt.Errorf("the primary in %s did not come back to version %s while watched (states: %v)", other, version, primary)
	}
	workload, err := s.watchedStates(cluster, "Deployment", s.w.workload)
	if err != nil {
		return err
	}
	at := cameBack(workload, ref)
	switch {
	case at.IsZero():
		return fmt.Errorf("the workload in %s did not come back to version %s while watched (states: %v)", cluster, version, workload)
	case at.Before(back):
		return fmt.Errorf("the workload in %s came back to version %s at %s, before the primary in %s did, at %s",
			cluster, version, at.Format(time.StampMilli), other, back.Format(time.StampMilli))
	}
	return nil
}
