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
	// Client reads the management cluster's Secrets. Required.
	Client kubernetes.Interface
	// ArgoCD is the source's configuration (defaulted). Required.
	ArgoCD config.ArgoCDDiscovery
	// Build is the configuration with the clusters as Clusters gives them
	// (the file's, the Application resources', the discovered clusters).
	// Required.
	Build func() (*config.Config, error)
	// Logger says which Secrets are no cluster, and why [none].
	Logger *slog.Logger
	// Metrics count the clusters found and the Secrets left out [none].
	Metrics *Metrics
	// Retry is how often a configuration the swap refused is tried again
	// [DefaultRetry].
	Retry time.Duration
}

// Source is Argo CD's cluster Secrets as a source of clusters.
type Source struct {
	o        Options
	informer cache.SharedIndexInformer
	wake     chan struct{}

	mu      sync.Mutex
	refused map[string]string // Secret -> why it is no cluster, as last logged
	synced  []config.Cluster  // the clusters the last applied sync swapped in
	pending bool              // the swap refused the last sync
}

// New returns a Source of the Secrets labelled
// argocd.argoproj.io/secret-type=cluster (and matching the configured
// selector) of the configured namespace; Start starts its watch.
func New(o Options) (*Source, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	sel, err := selector(o.ArgoCD.Selector)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(o.Client, 0, informers.WithNamespace(o.ArgoCD.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = sel }))
	s := &Source{o: o, informer: f.Core().V1().Secrets().Informer(), wake: make(chan struct{}, 1),
		refused: map[string]string{}}
	_, _ = s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke(s.wake) },
		UpdateFunc: func(any, any) { poke(s.wake) },
		DeleteFunc: func(any) { poke(s.wake) },
	})
	return s, nil
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

// Start runs the watch until ctx ends and waits, up to timeout, for its
// first list: Clusters then has every cluster Secret.
func (s *Source) Start(ctx context.Context, timeout time.Duration) error {
	go s.informer.Run(ctx.Done())
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), s.informer.HasSynced) {
		return fmt.Errorf("listing Argo CD's cluster Secrets in namespace %s of the management cluster: not done within %s", s.o.ArgoCD.Namespace, timeout)
	}
	return nil
}

// Clusters are the clusters of the Secrets the watch holds, by name;
// a Secret that is no cluster (ArgoCDCluster's error) is left out and
// logged once, as is the younger of two Secrets of one cluster name.
func (s *Source) Clusters() []config.Cluster {
	var secrets []*corev1.Secret
	for _, o := range s.informer.GetStore().List() {
		if sec, ok := o.(*corev1.Secret); ok {
			secrets = append(secrets, sec)
		}
	}
	slices.SortFunc(secrets, func(a, b *corev1.Secret) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	var out []config.Cluster
	refused := map[string]string{}
	owner := map[string]string{}
	for _, sec := range secrets {
		key := sec.Namespace + "/" + sec.Name
		c, err := ArgoCDCluster(sec)
		switch {
		case err != nil:
			refused[key] = err.Error()
		case owner[c.Name] != "":
			refused[key] = fmt.Sprintf("%s: cluster name %q is taken by the older Secret %s", c.Source, c.Name, owner[c.Name])
		default:
			owner[c.Name] = key
			out = append(out, c)
		}
	}
	s.mu.Lock()
	for key, why := range refused {
		if s.refused[key] != why {
			s.o.Logger.Warn("discovered cluster left out", "secret", key, "reason", why)
		}
	}
	s.refused = refused
	s.mu.Unlock()
	s.o.Metrics.set(sourceArgoCD, len(out), len(refused))
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
