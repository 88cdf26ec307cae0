package discovery

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
)

// Reloader is the one swap of the configuration in force (pkg/reload).
type Reloader interface {
	Reload(ctx context.Context, source string, build func() (*config.Config, error)) reload.Result
}

// SourceName is what the swap's log names a reload of the discovered
// clusters by.
const SourceName = "cluster discovery"

// DefaultRetry is how often a configuration the swap refused is tried
// again (Options.Retry's default).
const DefaultRetry = 15 * time.Second

// Options configure a Source.
type Options struct {
	// Inventories are where the clusters are read (ArgoCD,
	// ClusterProfiles, ClusterAPI), in order of precedence. At least one.
	Inventories []Inventory
	// Build is the configuration with the clusters as Clusters gives them
	// (the file's, the Application resources', the discovered clusters).
	// Required.
	Build func() (*config.Config, error)
	// Logger says which entries are no cluster, and why [none].
	Logger *slog.Logger
	// Metrics count the clusters found and the entries left out [none].
	Metrics *Metrics
	// Retry is how often a configuration the swap refused is tried again
	// [DefaultRetry].
	Retry time.Duration
}

// Inventory is one inventory of clusters in the management cluster: the
// watches of its objects and how an object is a cluster.
type Inventory struct {
	// source is the metrics' source label (argocd, clusterprofile).
	source    string
	what      string // what Start's error says it lists
	informers []cache.SharedIndexInformer
	// entries are the clusters the informers' stores declare now, or why
	// an object is none.
	entries func() []entry
}

// eachObject is an entries of the informers' objects, each one entry
// (none for an object of another type).
func eachObject(informers []cache.SharedIndexInformer, cluster func(obj any) (entry, bool)) func() []entry {
	return func() []entry {
		var out []entry
		for _, inf := range informers {
			for _, o := range inf.GetStore().List() {
				if e, ok := cluster(o); ok {
					out = append(out, e)
				}
			}
		}
		return out
	}
}

// entry is one object of an inventory as a cluster.
type entry struct {
	key     string // namespace/name, for the log
	created time.Time
	cluster config.Cluster
	err     error // why the object is no cluster
}

// Source is the inventories' clusters, followed live.
type Source struct {
	o    Options
	wake chan struct{}

	mu      sync.Mutex
	refused map[string]string // entry -> why it is no cluster, as last logged
	synced  []config.Cluster  // the clusters the last applied sync swapped in
	pending bool              // the swap refused the last sync
}

// New returns a Source of the inventories; Start starts their watches.
func New(o Options) (*Source, error) {
	if len(o.Inventories) == 0 {
		return nil, fmt.Errorf("fleet.discovery: no inventory to read")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	s := &Source{o: o, wake: make(chan struct{}, 1), refused: map[string]string{}}
	for _, inv := range o.Inventories {
		for _, inf := range inv.informers {
			_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { poke(s.wake) },
				UpdateFunc: func(any, any) { poke(s.wake) },
				DeleteFunc: func(any) { poke(s.wake) },
			})
		}
	}
	return s, nil
}

// ArgoCD is the inventory of Argo CD's cluster Secrets: those labelled
// argocd.argoproj.io/secret-type=cluster (and matching the configured
// selector) of the configured namespace, read with client.
func ArgoCD(client kubernetes.Interface, a config.ArgoCDDiscovery) (Inventory, error) {
	sel, err := selector(a.Selector)
	if err != nil {
		return Inventory{}, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(a.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel }))
	informers := []cache.SharedIndexInformer{f.Core().V1().Secrets().Informer()}
	return Inventory{source: sourceArgoCD, what: "Argo CD's cluster Secrets in namespace " + a.Namespace, informers: informers,
		entries: eachObject(informers, func(o any) (entry, bool) {
			sec, ok := o.(*corev1.Secret)
			if !ok {
				return entry{}, false
			}
			c, err := ArgoCDCluster(sec)
			return entry{key: "Secret " + sec.Namespace + "/" + sec.Name, created: sec.CreationTimestamp.Time, cluster: c, err: err}, true
		})}, nil
}

// selector is the Secrets' label selector: Argo CD's cluster type and
// the configured one.
func selector(extra string) (string, error) {
	sel := LabelSecretType + "=" + SecretTypeCluster
	if strings.TrimSpace(extra) == "" {
		return sel, nil
	}
	if _, err := labels.Parse(extra); err != nil {
		return "", fmt.Errorf("fleet.discovery.argocd.selector: %w", err)
	}
	return sel + "," + extra, nil
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Start runs the watches until ctx ends and waits, up to timeout, for
// their first list: Clusters then has every cluster of the inventories.
func (s *Source) Start(ctx context.Context, timeout time.Duration) error {
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, inv := range s.o.Inventories {
		for _, inf := range inv.informers {
			go inf.Run(ctx.Done())
		}
	}
	for _, inv := range s.o.Inventories {
		for _, inf := range inv.informers {
			if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
				return fmt.Errorf("listing %s of the management cluster: not done within %s", inv.what, timeout)
			}
		}
	}
	return nil
}

// Clusters are the clusters of the objects the watches hold, by name; an
// object that is no cluster (ArgoCDCluster's, ProfileCluster's or
// ClusterAPICluster's error)
// is left out and logged once, as is an object whose cluster name one of
// an inventory listed earlier in Options, or an older one of its own, has.
func (s *Source) Clusters() []config.Cluster {
	var out []config.Cluster
	refused := map[string]string{}
	owner := map[string]string{}
	for _, inv := range s.o.Inventories {
		entries := inv.entries()
		slices.SortFunc(entries, func(a, b entry) int {
			return cmp.Or(a.created.Compare(b.created), cmp.Compare(a.key, b.key))
		})
		found, left := 0, 0
		for _, e := range entries {
			key := inv.source + ": " + e.key
			switch {
			case e.err != nil:
				refused[key] = e.err.Error()
				left++
			case owner[e.cluster.Name] != "":
				refused[key] = fmt.Sprintf("%s: cluster name %q is taken by the older %s", e.cluster.Source, e.cluster.Name, owner[e.cluster.Name])
				left++
			default:
				owner[e.cluster.Name] = e.key
				out = append(out, e.cluster)
				found++
			}
		}
		s.o.Metrics.set(inv.source, found, left)
	}
	s.mu.Lock()
	for key, why := range refused {
		if s.refused[key] != why {
			s.o.Logger.Warn("discovered cluster left out", "entry", key, "reason", why)
		}
	}
	s.refused = refused
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b config.Cluster) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Run swaps in the configuration with the clusters as they are whenever a
// Secret changes (and, while the swap refuses it, every Options.Retry),
// until ctx ends.
func (s *Source) Run(ctx context.Context, r Reloader) error {
	t := time.NewTicker(s.o.Retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			s.Sync(ctx, r)
		case <-t.C:
			s.mu.Lock()
			pending := s.pending
			s.mu.Unlock()
			if pending {
				s.Sync(ctx, r)
			}
		}
	}
}

// Sync swaps in the configuration with the clusters as they are now,
// unless they are those the last applied sync swapped in.
func (s *Source) Sync(ctx context.Context, r Reloader) reload.Result {
	now := s.Clusters()
	s.mu.Lock()
	same := !s.pending && s.synced != nil && slices.EqualFunc(now, s.synced, sameCluster)
	s.mu.Unlock()
	if same {
		return reload.Result{Outcome: reload.Applied}
	}
	res := r.Reload(ctx, SourceName, s.o.Build)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = res.Outcome != reload.Applied
	if !s.pending {
		s.synced = now
		if s.synced == nil {
			s.synced = []config.Cluster{}
		}
	}
	return res
}

func sameCluster(a, b config.Cluster) bool {
	return a.Name == b.Name && a.Source == b.Source && maps.Equal(a.Labels, b.Labels) && bytes.Equal(a.KubeconfigData, b.KubeconfigData)
}
