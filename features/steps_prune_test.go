package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pipelines/tasks"
)

func (s *scenario) registerPruneSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the chart also renders the ConfigMap "([^"]*)" and the Service "([^"]*)"$`, s.chartRendersMore)
	sc.Step(`^the application does not prune$`, s.applicationDoesNotPrune)
	sc.Step(`^every cluster has the ConfigMap "([^"]*)" and the Service "([^"]*)"$`, s.everyClusterHas)
	sc.Step(`^the ConfigMaps "([^"]*)" are watched in every cluster$`, s.watchConfigMaps)
	sc.Step(`^a push removes "([^"]*)" from the chart$`, s.pushRemovesTemplate)
	sc.Step(`^a push removes "([^"]*)" from the chart and adds the ConfigMap "([^"]*)"$`, s.pushReplacesTemplate)
	sc.Step(`^in every cluster the ConfigMap "([^"]*)" was deleted after that cluster succeeded$`, s.prunedAfterSuccess)
	sc.Step(`^in cluster "([^"]*)" the ConfigMap "([^"]*)" was deleted and then created again$`, s.prunedThenRecreated)
	sc.Step(`^in every cluster the (ConfigMap|Service) "([^"]*)" (exists|does not exist)$`, s.objectInEveryCluster)
	sc.Step(`^every cluster's inventory is (that|the first) commit's: (.+)$`, s.inventoryIs)
}

// chartRendersMore adds a ConfigMap and a Service to the chart and amends
// the repository's first commit with them (before flotilla serves it).
func (s *scenario) chartRendersMore(ctx context.Context, configMap, service string) error {
	r := s.w.git
	dir := filepath.Join(r.work, "charts", r.chart, "templates")
	if err := writeFile(filepath.Join(dir, configMap+".yaml"), configMapTemplate(configMap)); err != nil {
		return err
	}
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: " + service +
		"\nspec:\n  selector: {app: {{ .Release.Name }}}\n  ports:\n    - {name: http, port: 80, targetPort: 9898}\n"
	if err := writeFile(filepath.Join(dir, service+".yaml"), svc); err != nil {
		return err
	}
	for _, args := range [][]string{{"add", "."}, {"commit", "--amend", "--no-edit"}, {"push", "-f", "origin", "main"}} {
		if _, err := git(ctx, r.work, args...); err != nil {
			return err
		}
	}
	head, err := git(ctx, r.work, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	r.commits["first"] = strings.TrimSpace(head)
	return nil
}

func configMapTemplate(name string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  release: {{ .Release.Name }}\n"
}

func (s *scenario) applicationDoesNotPrune() error {
	s.w.git.noPrune = true
	return nil
}

func (s *scenario) everyClusterHas(ctx context.Context, configMap, service string) error {
	for _, c := range s.w.clusters {
		if _, err := c.Kube.CoreV1().ConfigMaps(s.w.namespace).Get(ctx, configMap, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("ConfigMap %s in %s: %w", configMap, c.Name, err)
		}
		if _, err := c.Kube.CoreV1().Services(s.w.namespace).Get(ctx, service, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("Service %s in %s: %w", service, c.Name, err)
		}
	}
	return nil
}

// configMapWatch records, per cluster and ConfigMap, what a watch saw
// happen to it ("ADDED", "DELETED") and when.
type configMapWatch struct {
	mu     sync.Mutex
	seen   map[string][]watchedChange // by cluster + "/" + name
	cancel context.CancelFunc
}

type watchedChange struct {
	what watch.EventType
	at   time.Time
}

func (w *configMapWatch) changes(cluster, name string) []watchedChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen[cluster+"/"+name])
}

// watchConfigMaps watches the named ConfigMaps (comma-separated) in every
// cluster from now on, from their current resource version: a deletion
// and a creation are both seen, however quickly they follow each other.
func (s *scenario) watchConfigMaps(ctx context.Context, names string) error {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &configMapWatch{seen: map[string][]watchedChange{}, cancel: cancel}
	s.w.git.watch = w
	s.onCleanup(cancel)
	for _, c := range s.w.clusters {
		list, err := c.Kube.CoreV1().ConfigMaps(s.w.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing ConfigMaps in %s: %w", c.Name, err)
		}
		wi, err := c.Kube.CoreV1().ConfigMaps(s.w.namespace).Watch(wctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fmt.Errorf("watching ConfigMaps in %s: %w", c.Name, err)
		}
		want := strings.Split(names, ",")
		go func(cluster string) {
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				m, err := metaOf(ev.Object)
				if err != nil || !slices.Contains(want, m.GetName()) {
					continue
				}
				if ev.Type != watch.Added && ev.Type != watch.Deleted {
					continue
				}
				w.mu.Lock()
				k := cluster + "/" + m.GetName()
				w.seen[k] = append(w.seen[k], watchedChange{what: ev.Type, at: time.Now()})
				w.mu.Unlock()
			}
		}(c.Name)
	}
	return nil
}

func metaOf(o any) (metav1.Object, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no metadata", o)
	}
	return m, nil
}

// pushRemovesTemplate deletes a template of the chart and pushes the
// commit: "that" commit.
func (s *scenario) pushRemovesTemplate(ctx context.Context, name string) error {
	r := s.w.git
	path := filepath.Join("charts", r.chart, "templates", name+".yaml")
	if err := os.Remove(filepath.Join(r.work, path)); err != nil {
		return err
	}
	return s.commit(ctx, path, "drop "+name)
}

// pushReplacesTemplate deletes a template and adds a ConfigMap in one
// commit (with whatever else the scenario changed, e.g. a broken value).
func (s *scenario) pushReplacesTemplate(ctx context.Context, gone, added string) error {
	r := s.w.git
	dir := filepath.Join("charts", r.chart, "templates")
	if err := os.Remove(filepath.Join(r.work, dir, gone+".yaml")); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(r.work, dir, added+".yaml"), configMapTemplate(added)); err != nil {
		return err
	}
	if _, err := git(ctx, r.work, "add", "-A", dir); err != nil {
		return err
	}
	return s.commit(ctx, dir, "replace "+gone+" with "+added)
}

// clusterSucceededAt is when the rollout of that commit reported cluster
// succeeded, as the sink received it.
func (s *scenario) clusterSucceededAt(ctx context.Context, cluster string) (time.Time, error) {
	id, err := s.rolloutID(ctx, commitVersion(s.w.git.commits["that"]))
	if err != nil {
		return time.Time{}, err
	}
	e, err := s.w.sink.waitFor(ctx, cluster+" succeeded", func(e cloudevents.Event) bool {
		if e.Type() != events.TypeClusterSucceeded || events.RolloutID(e) != id {
			return false
		}
		p, err := events.Decode[events.ClusterResult](e)
		return err == nil && p.Cluster == cluster
	})
	if err != nil {
		return time.Time{}, err
	}
	return e.Time(), nil
}

// waitGone waits for the ConfigMap to be gone from the cluster.
func (s *scenario) waitGone(ctx context.Context, cluster, name string) error {
	c, err := clientsFor(cluster)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := c.Kube.CoreV1().ConfigMaps(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ConfigMap %s is still in cluster %s a minute on", name, cluster)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *scenario) prunedAfterSuccess(ctx context.Context, name string) error {
	for _, c := range s.w.clusters {
		if err := s.waitGone(ctx, c.Name, name); err != nil {
			return err
		}
		succeeded, err := s.clusterSucceededAt(ctx, c.Name)
		if err != nil {
			return err
		}
		var deleted []time.Time
		for _, ch := range s.w.git.watch.changes(c.Name, name) {
			if ch.what == watch.Deleted {
				deleted = append(deleted, ch.at)
			}
		}
		if len(deleted) != 1 {
			return fmt.Errorf("ConfigMap %s in %s: the watch saw %d deletions, want 1", name, c.Name, len(deleted))
		}
		// The event's time is flotilla's clock, the watch's this process's:
		// the same host.
		if deleted[0].Before(succeeded) {
			return fmt.Errorf("ConfigMap %s in %s was deleted at %s, before the cluster succeeded at %s",
				name, c.Name, deleted[0].Format(time.RFC3339Nano), succeeded.Format(time.RFC3339Nano))
		}
	}
	return nil
}

func (s *scenario) prunedThenRecreated(ctx context.Context, cluster, name string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var seq []string
		for _, ch := range s.w.git.watch.changes(cluster, name) {
			seq = append(seq, string(ch.what))
		}
		if slices.Equal(seq, []string{string(watch.Deleted), string(watch.Added)}) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ConfigMap %s in %s: the watch saw %v, want [DELETED ADDED] (pruned by the commit, recreated by the rollback)", name, cluster, seq)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s *scenario) objectInEveryCluster(ctx context.Context, kind, name, how string) error {
	for _, c := range s.w.clusters {
		if kind == "ConfigMap" && how == "does not exist" {
			if err := s.waitGone(ctx, c.Name, name); err != nil {
				return err
			}
			continue
		}
		var err error
		if kind == "ConfigMap" {
			_, err = c.Kube.CoreV1().ConfigMaps(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = c.Kube.CoreV1().Services(s.w.namespace).Get(ctx, name, metav1.GetOptions{})
		}
		if how == "exists" && err != nil {
			return fmt.Errorf("%s %s in %s: %w", kind, name, c.Name, err)
		}
		if how == "does not exist" && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s in %s: %v, want it gone", kind, name, c.Name, err)
		}
	}
	return nil
}

// inventoryIs reads each cluster's inventory (the ConfigMap in the
// application's namespace) and wants the commit's revision, exactly the
// objects listed ("Kind name, Kind name") and nothing pending.
func (s *scenario) inventoryIs(ctx context.Context, which, objects string) error {
	commit := s.w.git.commits[map[string]string{"that": "that", "the first": "first"}[which]]
	var want []string
	for _, o := range strings.Split(objects, ",") {
		kind, name, _ := strings.Cut(strings.TrimSpace(o), " ")
		group := ""
		if kind == "Deployment" {
			group = "apps"
		}
		want = append(want, s.w.namespace+"_"+strings.Trim(name, `"`)+"_"+group+"_"+kind)
	}
	slices.Sort(want)
	for _, c := range s.w.clusters {
		// The inventory of a cluster that succeeded is written by the
		// prune after it: wait for nothing pending.
		deadline := time.Now().Add(30 * time.Second)
		for {
			inv, err := tasks.ReadInventory(ctx, c.Kube, s.w.namespace, s.w.app)
			if err != nil {
				return err
			}
			var got []string
			for _, e := range inv.Entries {
				got = append(got, e.ID)
			}
			rev := "file://" + s.w.git.bare + "@" + commit
			if inv.Revision == rev && slices.Equal(got, want) && len(inv.Pending) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("inventory in %s: revision %s, entries %v, pending %v; want %s, %v, nothing pending",
					c.Name, inv.Revision, got, inv.Pending, rev, want)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return nil
}
