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
const SourceName = "application resources"

// key names a resource.
type key struct{ namespace, name string }

func (k key) String() string { return k.namespace + "/" + k.name }

// verdict is what the last Build made of a resource's generation.
type verdict struct {
	generation int64
	app        string // the application's name
	reason     string // v1alpha1.ReasonApplied (in the configuration built), ReasonInvalid, ReasonNameConflict
	message    string
	// fallback: this generation is refused, an earlier one accepted stays
	// in the configuration built.
	fallback bool
}

// Source is the Application resources as a source of configuration.
type Source struct {
	o         Options
	informers []cache.SharedIndexInformer
	wake      chan struct{} // a resource's generation changed
	status    chan struct{} // a Build made new verdicts

	mu       sync.Mutex
	verdicts map[key]verdict
	accepted map[key]acceptedApp // the last generation of each accepted
	built    *config.Config      // the configuration the last Build made
	refusal  string              // why the swap refused the last sync's configuration, "" when it applied it
	synced   map[key]int64       // the generations the last applied sync swapped in
}

type acceptedApp struct {
	generation int64
	app        config.Application
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
		verdicts: map[key]verdict{}, accepted: map[key]acceptedApp{}}
	namespaces := o.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	for _, ns := range namespaces {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Client, 0, ns, nil)
		inf := f.ForResource(v1alpha1.Applications).Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { poke(s.wake) },
			UpdateFunc: func(old, next any) {
				// Only the spec's changes (a new generation) change the
				// configuration; the statuses RunStatus writes do not.
				prev, _ := old.(*unstructured.Unstructured)
				cur, _ := next.(*unstructured.Unstructured)
				if prev == nil || cur == nil || prev.GetGeneration() != cur.GetGeneration() {
					poke(s.wake)
				}
			},
			DeleteFunc: func(any) { poke(s.wake) },
		})
		s.informers = append(s.informers, inf)
	}
	return s
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Start runs the informers until ctx ends and waits, up to timeout, for
// their first list: Build then sees every resource.
func (s *Source) Start(ctx context.Context, timeout time.Duration) error {
	for _, inf := range s.informers {
		go inf.Run(ctx.Done())
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, inf := range s.informers {
		if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
			return fmt.Errorf("listing the Application resources (%s) of the management cluster: not done within %s", v1alpha1.Applications.GroupResource(), timeout)
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
	now := generations(s.list())
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
func (s *Source) list() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, inf := range s.informers {
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

func generations(objs []*unstructured.Unstructured) map[key]int64 {
	out := make(map[key]int64, len(objs))
	for _, u := range objs {
		out[key{u.GetNamespace(), u.GetName()}] = u.GetGeneration()
	}
	return out
}

// candidate is a resource on its way into the configuration: its current
// generation's application, else the last accepted one, else none.
type candidate struct {
	key      key
	gen      int64
	current  *config.Application
	fallback *config.Application
	verdict  verdict
}

// app is what the candidate puts into the configuration now, nil when
// nothing.
func (c *candidate) app() *config.Application {
	if c.current != nil {
		return c.current
	}
	return c.fallback
}

// refuse records why the candidate's application is refused and falls
// back to the previous one accepted (or to none).
func (c *candidate) refuse(reason, message string) {
	if c.current == nil { // the fallback itself is refused now
		c.fallback = nil
		c.verdict.fallback = false
		return
	}
	c.verdict = verdict{generation: c.gen, app: c.verdict.app, reason: reason, message: message}
	c.current = nil
	c.verdict.fallback = c.fallback != nil
}

// Build is the configuration of the file at path with the resources'
// applications (what the swap takes, for the file's reloads too): each
// resource's current generation, or the last one accepted when the
// current one is refused, or nothing. It fails only when the file itself
// does (or the resources' applications cannot be copied).
func (s *Source) Build(path string) (*config.Config, error) {
	objs := s.list()
	s.mu.Lock()
	accepted := maps.Clone(s.accepted)
	s.mu.Unlock()
	cands := make([]*candidate, 0, len(objs))
	owner := map[string]key{} // application name -> the resource that has it
	for _, u := range objs {
		c := &candidate{key: key{u.GetNamespace(), u.GetName()}, gen: u.GetGeneration()}
		c.verdict = verdict{generation: c.gen, app: u.GetName()}
		if a, ok := accepted[c.key]; ok {
			c.fallback = &a.app
		}
		if first, taken := owner[u.GetName()]; taken {
			c.verdict.reason, c.verdict.message = v1alpha1.ReasonNameConflict,
				fmt.Sprintf("the application name %q is taken by the older Application %s", u.GetName(), first)
			c.fallback = nil // the older one has the name
			cands = append(cands, c)
			continue
		}
		owner[u.GetName()] = c.key
		if a, err := Convert(u); err != nil {
			c.verdict.reason, c.verdict.message = v1alpha1.ReasonInvalid, err.Error()
			c.verdict.fallback = c.fallback != nil
		} else {
			c.current = &a
		}
		cands = append(cands, c)
	}
	var (
		cfg *config.Config
		err error
	)
	for range 2*len(cands) + 1 {
		var apps []config.Application
		var in []*candidate // the candidates of apps, in order
		for _, c := range cands {
			if a := c.app(); a != nil {
				apps, in = append(apps, *a), append(in, c)
			}
		}
		var fileApps int
		extra := config.Extra{Applications: apps}
		if s.o.Clusters != nil {
			extra.Clusters = s.o.Clusters()
		}
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
			if i, rest, ok := extraProblem(p.Path, fileApps, len(apps)); ok {
				bad[in[i]] = append(bad[in[i]], config.Problem{Path: rest, Message: p.Message})
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
				if strings.HasPrefix(p.Message, "duplicate application name") {
					reason = v1alpha1.ReasonNameConflict
				}
			}
			c.refuse(reason, strings.Join(msgs, "; "))
		}
	}
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.verdicts
	s.verdicts = map[key]verdict{}
	next := map[key]acceptedApp{}
	for _, c := range cands {
		v := c.verdict
		switch {
		case c.current != nil:
			v.reason, v.message, v.fallback = v1alpha1.ReasonApplied, "", false
			next[c.key] = acceptedApp{generation: c.gen, app: *c.current}
		case c.fallback != nil:
			v.fallback = true
			next[c.key] = s.accepted[c.key]
		default:
			v.fallback = false
		}
		if v.reason != v1alpha1.ReasonApplied && before[c.key] != v {
			s.o.Logger.Warn("application resource refused", "resource", c.key.String(), "generation", c.gen,
				"reason", v.reason, "message", v.message, "earlier_generation_stays", v.fallback)
		}
		s.verdicts[c.key] = v
	}
	s.accepted, s.built = next, cfg
	poke(s.status)
	return cfg, nil
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
	case "":
		rest = "spec"
	default:
		rest = "spec." + rest
	}
	return k - fileApps, rest, true
}
