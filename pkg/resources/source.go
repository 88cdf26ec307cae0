package resources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
	"github.com/flotilla-cd/flotilla/pkg/resources/v1alpha1"
)

// Reloader is the one swap of the configuration in force (pkg/reload).
type Reloader interface {
	Reload(ctx context.Context, source string, build func() (*config.Config, error)) reload.Result
}

// Options configure a Source.
type Options struct {
	// Client reads (and RunStatus writes) the management cluster's
	// Applications. Required.
	Client dynamic.Interface
	// Namespaces watched; empty: every namespace.
	Namespaces []string
	// PlatformNamespaces are where the Cluster resources are honoured
	// (their Secrets read); a Cluster of another namespace Namespaces
	// watches is not Ready, NotPlatformNamespace. Empty: no Cluster
	// resource is read.
	PlatformNamespaces []string
	// Path is the configuration file the resources' applications join.
	// Required.
	Path string
	// Live is the configuration in force (what RunStatus says a resource
	// is in or not). Required.
	Live config.Provider
	// Clusters are the clusters discovered (fleet.discovery, pkg/discovery)
	// that each Build adds to the file's [none].
	Clusters func() []config.Cluster
	// Logger says what each resource became [none].
	Logger *slog.Logger
	// Retry is how often a configuration the swap refused is built and
	// tried again (a guard's refusal, an application removed while its
	// rollout is in flight, passes with time) [DefaultRetry].
	Retry time.Duration
}

// DefaultRetry is Options.Retry's default.
const DefaultRetry = 15 * time.Second

// SourceName is what the swap's log names a reload of the resources by.
const SourceName = "management cluster resources"

// Kinds of resources.
const (
	kindApplication = "Application"
	kindCluster     = "Cluster"
	kindWavePolicy  = "WavePolicy"
)

// key names a resource.
type key struct{ kind, namespace, name string }

func (k key) String() string { return k.kind + " " + k.namespace + "/" + k.name }

// verdict is what the last Build made of a resource's generation.
type verdict struct {
	generation int64
	name       string // the application's or the cluster's name
	// reason: v1alpha1.ReasonApplied (in the configuration built),
	// ReasonInvalid, ReasonNameConflict, ReasonNotPlatformNamespace
	reason  string
	message string
	// fallback: this generation is refused, an earlier one accepted stays
	// in the configuration built.
	fallback bool
}

// Source is the Application resources as a source of configuration.
type Source struct {
	o         Options
	informers []cache.SharedIndexInformer          // the Applications'
	clusters  []cache.SharedIndexInformer          // the Clusters'
	policies  []cache.SharedIndexInformer          // the WavePolicies'
	secrets   map[string]cache.SharedIndexInformer // the platform namespaces' Secrets
	platform  map[string]bool                      // Options.PlatformNamespaces
	wake      chan struct{}                        // a resource's generation changed
	status    chan struct{}                        // a Build made new verdicts

	mu       sync.Mutex
	verdicts map[key]verdict
	accepted map[key]acceptedItem // the last generation of each accepted
	built    *config.Config       // the configuration the last Build made
	refusal  string               // why the swap refused the last sync's configuration, "" when it applied it
	synced   map[key]string       // the states the last applied sync swapped in
}

// item is what a resource puts into the configuration: an application
// or a cluster.
type item struct {
	app     *config.Application
	cluster *config.Cluster
	waves   *config.Waves
}

type acceptedItem struct {
	generation int64
	item       item
}

// New returns a Source; Start starts its watch.
func New(o Options) *Source {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	s := &Source{o: o, wake: make(chan struct{}, 1), status: make(chan struct{}, 1),
		verdicts: map[key]verdict{}, accepted: map[key]acceptedItem{},
		secrets: map[string]cache.SharedIndexInformer{}, platform: map[string]bool{}}
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	// Only the spec's changes (a new generation) change the
	// configuration; the statuses RunStatus writes do not.
	onSpec := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke(s.wake) },
		UpdateFunc: func(old, next any) {
			prev, _ := old.(*unstructured.Unstructured)
			cur, _ := next.(*unstructured.Unstructured)
			if prev == nil || cur == nil || prev.GetGeneration() != cur.GetGeneration() {
				poke(s.wake)
			}
		},
		DeleteFunc: func(any) { poke(s.wake) },
	}
	watch := func(ns string, gvr schema.GroupVersionResource, h cache.ResourceEventHandler) cache.SharedIndexInformer {
		inf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Client, 0, ns, nil).ForResource(gvr).Informer()
		_, _ = inf.AddEventHandler(h)
		return inf
	}
	for _, ns := range namespaces {
		s.informers = append(s.informers, watch(ns, v1alpha1.Applications, onSpec))
	}
	if len(o.PlatformNamespaces) == 0 {
		return s
	}
	// The Clusters of the teams' namespaces too: theirs are not Ready,
	// saying why.
	clusterNamespaces := namespaces
	if len(o.Namespaces) > 0 {
		clusterNamespaces = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(o.Namespaces), o.PlatformNamespaces...))))
	}
	for _, ns := range clusterNamespaces {
		s.clusters = append(s.clusters, watch(ns, v1alpha1.Clusters, onSpec))
		s.policies = append(s.policies, watch(ns, v1alpha1.WavePolicies, onSpec))
	}
	always := func(any) { poke(s.wake) }
	for _, ns := range o.PlatformNamespaces {
		s.platform[ns] = true
		s.secrets[ns] = watch(ns, secrets, cache.ResourceEventHandlerFuncs{AddFunc: always,
			UpdateFunc: func(any, any) { poke(s.wake) }, DeleteFunc: always})
	}
	return s
}

// secrets is the core API's Secrets, read with the dynamic client.
var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Start runs the informers until ctx ends and waits, up to timeout, for
// their first list: Build then sees every resource.
func (s *Source) Start(ctx context.Context, timeout time.Duration) error {
	all := slices.Concat(s.informers, s.clusters, s.policies, slices.Collect(maps.Values(s.secrets)))
	for _, inf := range all {
		go inf.Run(ctx.Done())
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, inf := range all {
		if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
			return fmt.Errorf("listing the resources (%s, %s, %s and the platform namespaces' Secrets) of the management cluster: not done within %s",
				v1alpha1.Applications.GroupResource(), v1alpha1.Clusters.GroupResource(), v1alpha1.WavePolicies.GroupResource(), timeout)
		}
	}
	return nil
}

// Run reloads the configuration with the resources whenever one changes
// (and, while the swap refuses the resources' configuration, every
// Options.Retry), until ctx ends.
func (s *Source) Run(ctx context.Context, r Reloader) error {
	t := time.NewTicker(s.o.Retry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			s.Sync(ctx, r, false)
		case <-t.C:
			s.mu.Lock()
			refused := s.refusal != ""
			s.mu.Unlock()
			if refused {
				s.Sync(ctx, r, true)
			}
		}
	}
}

// Sync swaps in the configuration with the resources as they are now,
// unless they are the generations the last applied sync swapped in
// (force: even then).
func (s *Source) Sync(ctx context.Context, r Reloader, force bool) reload.Result {
	now := s.states()
	s.mu.Lock()
	same := s.refusal == "" && s.synced != nil && maps.Equal(now, s.synced)
	s.mu.Unlock()
	if same && !force {
		return reload.Result{Outcome: reload.Applied}
	}
	res := r.Reload(ctx, SourceName, func() (*config.Config, error) { return s.Build(s.o.Path) })
	s.mu.Lock()
	switch res.Outcome {
	case reload.Applied:
		s.refusal, s.synced = "", now
	case reload.RestartNeeded:
		s.refusal = "the configuration with it was refused: these fields need a restart: " + strings.Join(res.Fields, ", ")
	default:
		s.refusal = "the configuration with it was refused: " + res.Err.Error()
	}
	s.mu.Unlock()
	poke(s.status)
	return res
}

// list is every Application resource the informers hold, oldest first
// (the older of two with one name keeps it).
func (s *Source) list() []*unstructured.Unstructured { return listOf(s.informers) }

// listClusters is every Cluster resource, oldest first.
func (s *Source) listClusters() []*unstructured.Unstructured { return listOf(s.clusters) }

// listPolicies is every WavePolicy resource, oldest first.
func (s *Source) listPolicies() []*unstructured.Unstructured { return listOf(s.policies) }

func listOf(informers []cache.SharedIndexInformer) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, inf := range informers {
		for _, o := range inf.GetStore().List() {
			if u, ok := o.(*unstructured.Unstructured); ok {
				out = append(out, u)
			}
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		return cmp.Or(a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time),
			cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// states is each resource's generation and, for a Cluster, the version
// of the Secret it names: what a Build reads of it.
func (s *Source) states() map[key]string {
	out := map[key]string{}
	for _, u := range s.list() {
		out[key{kindApplication, u.GetNamespace(), u.GetName()}] = strconv.FormatInt(u.GetGeneration(), 10)
	}
	for _, u := range s.listClusters() {
		st := strconv.FormatInt(u.GetGeneration(), 10)
		if sec, ok := s.secret(u.GetNamespace(), secretName(u)); ok {
			st += "/" + sec.GetResourceVersion()
		}
		out[key{kindCluster, u.GetNamespace(), u.GetName()}] = st
	}
	for _, u := range s.listPolicies() {
		out[key{kindWavePolicy, u.GetNamespace(), u.GetName()}] = strconv.FormatInt(u.GetGeneration(), 10)
	}
	return out
}

// secret is the Secret name of a platform namespace, as the informer has
// it.
func (s *Source) secret(namespace, name string) (*unstructured.Unstructured, bool) {
	inf := s.secrets[namespace]
	if inf == nil || name == "" {
		return nil, false
	}
	o, ok, err := inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	u, ok := o.(*unstructured.Unstructured)
	return u, ok
}

// secretData is SecretData of the informers' Secrets.
func (s *Source) secretData(namespace, name, k string) ([]byte, error) {
	u, ok := s.secret(namespace, name)
	if !ok {
		return nil, fmt.Errorf("no Secret %s in namespace %s", name, namespace)
	}
	return secretValue(u, k)
}

// candidate is a resource on its way into the configuration: its current
// generation's item, else the last accepted one, else none.
type candidate struct {
	key      key
	gen      int64
	current  *item
	fallback *item
	verdict  verdict
}

// item is what the candidate puts into the configuration now, nil when
// nothing.
func (c *candidate) item() *item {
	if c.current != nil {
		return c.current
	}
	return c.fallback
}

// refuse records why the candidate's item is refused and falls back to
// the previous one accepted (or to none).
func (c *candidate) refuse(reason, message string) {
	if c.current == nil { // the fallback itself is refused now
		c.fallback = nil
		c.verdict.fallback = false
		return
	}
	c.verdict = verdict{generation: c.gen, name: c.verdict.name, reason: reason, message: message}
	c.current = nil
	c.verdict.fallback = c.fallback != nil
}

// candidates are the resources objs of a kind as candidates, oldest
// first; the older of two with one name keeps it, the other is a
// NameConflict. convert makes a resource's item; skip, when it says why,
// leaves a resource out with that verdict (reason, message).
func candidates(kind string, objs []*unstructured.Unstructured, accepted map[key]acceptedItem,
	convert func(*unstructured.Unstructured) (item, error), skip func(*unstructured.Unstructured) (string, string)) []*candidate {
	cands := make([]*candidate, 0, len(objs))
	owner := map[string]key{} // name -> the resource that has it
	for _, u := range objs {
		c := &candidate{key: key{kind, u.GetNamespace(), u.GetName()}, gen: u.GetGeneration()}
		c.verdict = verdict{generation: c.gen, name: u.GetName()}
		cands = append(cands, c)
		if reason, message := skip(u); reason != "" {
			c.verdict.reason, c.verdict.message = reason, message
			continue
		}
		if a, ok := accepted[c.key]; ok {
			c.fallback = &a.item
		}
		if first, taken := owner[u.GetName()]; taken {
			c.verdict.reason, c.verdict.message = v1alpha1.ReasonNameConflict,
				fmt.Sprintf("the %s name %q is taken by the older %s %s/%s", strings.ToLower(kind), u.GetName(), kind, first.namespace, first.name)
			c.fallback = nil // the older one has the name
			continue
		}
		owner[u.GetName()] = c.key
		if it, err := convert(u); err != nil {
			c.verdict.reason, c.verdict.message = v1alpha1.ReasonInvalid, err.Error()
			c.verdict.fallback = c.fallback != nil
		} else {
			c.current = &it
		}
	}
	return cands
}

// Build is the configuration of the file at path with the resources'
// applications and clusters (what the swap takes, for the file's reloads
// too): each resource's current generation, or the last one accepted when
// the current one is refused, or nothing. It fails only when the file
// itself does (or the resources' applications cannot be copied).
func (s *Source) Build(path string) (*config.Config, error) {
	s.mu.Lock()
	accepted := maps.Clone(s.accepted)
	s.mu.Unlock()
	never := func(*unstructured.Unstructured) (string, string) { return "", "" }
	apps := candidates(kindApplication, s.list(), accepted, func(u *unstructured.Unstructured) (item, error) {
		a, err := Convert(u)
		return item{app: &a}, err
	}, never)
	clusters := candidates(kindCluster, s.listClusters(), accepted, func(u *unstructured.Unstructured) (item, error) {
		c, err := ConvertCluster(u, s.secretData)
		return item{cluster: &c}, err
	}, s.outsidePlatform)
	policies := candidates(kindWavePolicy, s.listPolicies(), accepted, func(u *unstructured.Unstructured) (item, error) {
		w, err := ConvertWavePolicy(u)
		return item{waves: &w}, err
	}, s.outsidePlatform)
	cands := slices.Concat(apps, clusters, policies)
	var inForce *candidate // the WavePolicy in force: the oldest with waves to give
	var (
		cfg *config.Config
		err error
	)
	for range 2*len(cands) + 1 {
		var extra config.Extra
		if s.o.Clusters != nil {
			extra.Clusters = s.o.Clusters()
		}
		discovered := len(extra.Clusters)
		var in []*candidate // the candidates of extra.Applications, in order
		bySource := map[string]*candidate{}
		inForce = nil
		for _, c := range cands {
			switch it := c.item(); {
			case it == nil:
			case it.waves != nil:
				if inForce == nil {
					inForce, extra.Waves = c, it.waves
				}
			case it.app != nil:
				extra.Applications, in = append(extra.Applications, *it.app), append(in, c)
			case it.cluster != nil:
				extra.Clusters = append(extra.Clusters, *it.cluster)
				bySource[it.cluster.Source] = c
			}
		}
		var fileApps int
		cfg, fileApps, err = config.LoadExtra(path, extra)
		if err == nil {
			break
		}
		verr := (*config.ValidationError)(nil)
		if !errors.As(err, &verr) {
			return nil, err
		}
		bad := map[*candidate][]config.Problem{}
		for _, p := range verr.Problems {
			if i, rest, ok := extraProblem(p.Path, fileApps, len(extra.Applications)); ok {
				bad[in[i]] = append(bad[in[i]], config.Problem{Path: rest, Message: p.Message})
				continue
			}
			for _, cl := range extra.Clusters[discovered:] {
				if rest, ok := clusterProblem(p.Path, cl.Source); ok {
					c := bySource[cl.Source]
					bad[c] = append(bad[c], config.Problem{Path: rest, Message: p.Message})
					break
				}
			}
			if inForce != nil {
				if rest, ok := wavesProblem(p); ok {
					bad[inForce] = append(bad[inForce], config.Problem{Path: rest, Message: p.Message})
				}
			}
		}
		if len(bad) == 0 {
			return nil, err // the file's own problems: refused whole
		}
		for c, ps := range bad {
			reason := v1alpha1.ReasonInvalid
			msgs := make([]string, len(ps))
			for i, p := range ps {
				msgs[i] = p.String()
				switch {
				case strings.HasPrefix(p.Message, "duplicate application name") || strings.HasPrefix(p.Message, "duplicate cluster name"):
					reason = v1alpha1.ReasonNameConflict
				case strings.HasPrefix(p.Message, config.ProblemProjectConflict):
					reason = v1alpha1.ReasonProjectConflict
				}
			}
			c.refuse(reason, strings.Join(msgs, "; "))
		}
	}
	if err != nil {
		return nil, err
	}
	for _, c := range policies {
		if c != inForce && c.item() != nil {
			c.verdict = verdict{generation: c.gen, name: c.verdict.name, reason: v1alpha1.ReasonConflict,
				message: fmt.Sprintf("the older WavePolicy %s/%s is in force: one WavePolicy rules the fleet", inForce.key.namespace, inForce.key.name)}
			c.current, c.fallback = nil, nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.verdicts
	s.verdicts = map[key]verdict{}
	next := map[key]acceptedItem{}
	for _, c := range cands {
		v := c.verdict
		switch {
		case c.current != nil:
			v.reason, v.message, v.fallback = v1alpha1.ReasonApplied, "", false
			next[c.key] = acceptedItem{generation: c.gen, item: *c.current}
		case c.fallback != nil:
			v.fallback = true
			next[c.key] = s.accepted[c.key]
		default:
			v.fallback = false
		}
		if v.reason != v1alpha1.ReasonApplied && before[c.key] != v {
			s.o.Logger.Warn("resource refused", "resource", c.key.String(), "generation", c.gen,
				"reason", v.reason, "message", v.message, "earlier_generation_stays", v.fallback)
		}
		s.verdicts[c.key] = v
	}
	s.accepted, s.built = next, cfg
	poke(s.status)
	return cfg, nil
}

// outsidePlatform says why a Cluster resource is not honoured: it is in
// none of the platform's namespaces.
func (s *Source) outsidePlatform(u *unstructured.Unstructured) (reason, message string) {
	if s.platform[u.GetNamespace()] {
		return "", ""
	}
	return v1alpha1.ReasonNotPlatformNamespace, fmt.Sprintf("a %s is honoured only in the platform's namespaces (server.resources.platformNamespaces: %s), not in %s: it changes nothing",
		u.GetKind(), strings.Join(s.o.PlatformNamespaces, ", "), u.GetNamespace())
}

// appPath matches a problem's path in the i-th application.
var appPath = regexp.MustCompile(`^applications\[(\d+)\](.*)$`)

// extraProblem tells whether path is in the i-th of the n applications
// after the file's fileApps, and the rest of the path as the resource's
// (spec.<field>, metadata.name for the name).
func extraProblem(path string, fileApps, n int) (i int, rest string, ok bool) {
	m := appPath.FindStringSubmatch(path)
	if m == nil {
		return 0, "", false
	}
	k, err := strconv.Atoi(m[1])
	if err != nil || k < fileApps || k >= fileApps+n {
		return 0, "", false
	}
	switch rest = strings.TrimPrefix(m[2], "."); rest {
	case "name":
		rest = "metadata.name"
	case "metadata.namespace":
	case "":
		rest = "spec"
	default:
		rest = "spec." + rest
	}
	return k - fileApps, rest, true
}
