package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/canary"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// Set holds a client configuration per cluster of the fleet. Update
// changes its clusters live: a cluster added gets its client (its watch
// caches start on its first read), a removed one's clients, watch caches
// and health go, a changed one's (another kubeconfig, context, server or
// credentials) are made anew.
type Set struct {
	mu      sync.Mutex
	cfgs    map[string]*rest.Config
	clients map[string]*clients
	caches  map[nsKey]*nsCache      // see cache.go
	health  map[string]*healthEntry // see health.go
	closed  bool
	// primaryChanged is told of primaries changed or gone (observe.go).
	primaryChanged func(cluster, namespace, workload string)
}

type clients struct {
	kube    kubernetes.Interface
	flagger flaggerclient.Interface
}

// NewSet loads the kubeconfig of every cluster.
func NewSet(clusters []config.Cluster) (*Set, error) {
	cfgs, err := LoadConfigs(clusters)
	if err != nil {
		return nil, err
	}
	return &Set{cfgs: cfgs, clients: map[string]*clients{}}, nil
}

// LoadConfigs loads the client configuration of every cluster from its
// kubeconfig (and context): what NewSet and Update take, and what a new
// configuration is checked with before it is swapped in.
func LoadConfigs(clusters []config.Cluster) (map[string]*rest.Config, error) {
	cfgs := make(map[string]*rest.Config, len(clusters))
	var errs []error
	for _, c := range clusters {
		var (
			cfg *rest.Config
			err error
		)
		if c.KubeconfigData != nil {
			cfg, err = kube.RESTConfigFromKubeconfig(c.KubeconfigData)
		} else {
			cfg, err = kube.RESTConfig(c.Kubeconfig, c.Context)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", cmp.Or(c.Source, "fleet.clusters["+c.Name+"]"), err))
			continue
		}
		cfgs[c.Name] = cfg
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fault.Permanent(err)
	}
	return cfgs, nil
}

// Changes are the clusters an Update added, removed and changed (sorted).
type Changes struct {
	Added, Removed, Changed []string
}

// Empty tells whether the Update changed nothing.
func (c Changes) Empty() bool { return len(c.Added)+len(c.Removed)+len(c.Changed) == 0 }

// Update makes the Set's clusters those of clusters: their kubeconfigs
// are loaded first (LoadConfigs), and when one fails nothing changes. A
// removed or changed cluster's clients, watch caches (stopped) and
// health go; its next read makes them anew from the new configuration.
func (s *Set) Update(clusters []config.Cluster) (Changes, error) {
	next, err := LoadConfigs(clusters)
	if err != nil {
		return Changes{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ch Changes
	for name, cfg := range next {
		old, ok := s.cfgs[name]
		switch {
		case !ok:
			ch.Added = append(ch.Added, name)
		case !SameServer(old, cfg):
			ch.Changed = append(ch.Changed, name)
			s.forget(name)
		default:
			continue
		}
		s.cfgs[name] = cfg
	}
	for name := range s.cfgs {
		if _, ok := next[name]; !ok {
			ch.Removed = append(ch.Removed, name)
			s.forget(name)
			delete(s.cfgs, name)
		}
	}
	slices.Sort(ch.Added)
	slices.Sort(ch.Removed)
	slices.Sort(ch.Changed)
	return ch, nil
}

// forget drops what the Set made for a cluster: its clients, its watch
// caches (stopped) and its health. Called with s.mu held.
func (s *Set) forget(name string) {
	delete(s.clients, name)
	delete(s.health, name)
	for k, c := range s.caches {
		if k.cluster == name {
			close(c.stop)
			delete(s.caches, k)
		}
	}
}

// SameServer tells whether two client configurations reach the same API
// server as the same user: a kubeconfig rewritten with a rotated token or
// another server is a change, one read again unchanged is not.
func SameServer(a, b *rest.Config) bool {
	return a.Host == b.Host && a.APIPath == b.APIPath && a.Username == b.Username && a.Password == b.Password &&
		a.BearerToken == b.BearerToken && a.BearerTokenFile == b.BearerTokenFile &&
		reflect.DeepEqual(a.TLSClientConfig, b.TLSClientConfig) && reflect.DeepEqual(a.Impersonate, b.Impersonate) &&
		reflect.DeepEqual(a.ExecProvider, b.ExecProvider) && reflect.DeepEqual(a.AuthProvider, b.AuthProvider)
}

// Names are the Set's clusters, sorted.
func (s *Set) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.cfgs))
}

// Config returns the client configuration of a cluster.
func (s *Set) Config(name string) (*rest.Config, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.config(name)
}

// config is Config with s.mu held.
func (s *Set) config(name string) (*rest.Config, error) {
	cfg, ok := s.cfgs[name]
	if !ok {
		return nil, fault.Permanent(fmt.Errorf("unknown cluster %q (not in the fleet's configuration)", name))
	}
	return cfg, nil
}

func (s *Set) clientsFor(name string) (*clients, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[name]; ok {
		return c, nil
	}
	cfg, err := s.config(name)
	if err != nil {
		return nil, err
	}
	k, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating client for %s: %w", name, err)
	}
	f, err := flaggerclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating flagger client for %s: %w", name, err)
	}
	c := &clients{kube: k, flagger: f}
	s.clients[name] = c
	return c, nil
}

// CanaryStatus is the live state of one canary (the domain's type).
type CanaryStatus = rollout.CanaryStatus

// CanaryStatus reads a canary and its workloads: w is the canary's target,
// after which flotilla names the canary, of kind Deployment (also when empty)
// or DaemonSet; Flagger's primary is <name>-primary of the same kind. An empty
// w.Container means the first container.
func (s *Set) CanaryStatus(ctx context.Context, clusterName, namespace string, w config.Workload) (CanaryStatus, error) {
	var st CanaryStatus
	c, err := s.clientsFor(clusterName)
	if err != nil {
		return st, err
	}
	// flotilla names a canary after its target, so the canary and both
	// workloads are read at once: one round trip instead of three, on the path
	// of every Flagger event. A canary that targets something else has its
	// workloads read again.
	var (
		wg                 sync.WaitGroup
		cn                 *flaggerv1.Canary
		cnErr, tErr, pErr  error
		targetImg, primImg string
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		cn, cnErr = c.flagger.FlaggerV1beta1().Canaries(namespace).Get(ctx, w.Name, metav1.GetOptions{})
	}()
	go func() { defer wg.Done(); targetImg, tErr = image(ctx, c, namespace, w.Kind, w.Name, w.Container) }()
	go func() {
		defer wg.Done()
		primImg, pErr = image(ctx, c, namespace, w.Kind, w.Name+"-primary", w.Container)
	}()
	wg.Wait()
	if cnErr != nil {
		return st, fmt.Errorf("reading canary %s/%s in %s: %w", namespace, w.Name, clusterName, cnErr)
	}
	st.Phase, st.Weight = string(cn.Status.Phase), cn.Status.CanaryWeight
	st.Checksum, st.Transition = cn.Status.LastAppliedSpec, cn.Status.LastTransitionTime.Time
	if t := cn.Spec.TargetRef; t.Name != w.Name || kindOf(t.Kind) != kindOf(w.Kind) {
		targetImg, tErr = image(ctx, c, namespace, t.Kind, t.Name, w.Container)
		if tErr == nil {
			primImg, pErr = image(ctx, c, namespace, t.Kind, t.Name+"-primary", w.Container)
		}
	}
	if tErr != nil {
		return st, tErr
	}
	if pErr != nil {
		return st, pErr
	}
	st.TargetImage, st.PrimaryImage = targetImg, primImg
	return releaseStatus(ctx, c, namespace, cn, st)
}

// kindOf returns the workload kind, Deployment when empty.
func kindOf(kind string) string {
	if kind == "" {
		return config.KindDeployment
	}
	return kind
}

// image returns the image of the container of the workload of kind kind, or
// "" when there is no such workload or container.
func image(ctx context.Context, c *clients, namespace, kind, name, container string) (string, error) {
	pod, err := template(ctx, c, namespace, kind, name)
	if err != nil || pod == nil {
		return "", err
	}
	return revision(*pod, container), nil
}

// template returns the pod template of the workload of kind kind, nil
// when there is no such workload.
func template(ctx context.Context, c *clients, namespace, kind, name string) (*corev1.PodTemplateSpec, error) {
	var (
		pod corev1.PodTemplateSpec
		err error
	)
	switch kindOf(kind) {
	case config.KindDeployment:
		var d *appsv1.Deployment
		if d, err = c.kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			pod = d.Spec.Template
		}
	case config.KindDaemonSet:
		var d *appsv1.DaemonSet
		if d, err = c.kube.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil {
			pod = d.Spec.Template
		}
	default:
		return nil, fault.Permanent(fmt.Errorf("reading %s/%s: unsupported workload kind %q", namespace, name, kind))
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s/%s: %w", strings.ToLower(kindOf(kind)), namespace, name, err)
	}
	return &pod, nil
}

// revision is what a workload runs: a git application's revision
// (canary.AnnotationRevision on its pod template), else the image of its
// container.
func revision(t corev1.PodTemplateSpec, container string) string {
	if r := t.Annotations[canary.AnnotationRevision]; r != "" {
		return r
	}
	return containerImage(t.Spec, container)
}

// containerImage returns the image of the named container (the first when
// container is ""), or "".
func containerImage(pod corev1.PodSpec, container string) string {
	for i, ct := range pod.Containers {
		if ct.Name == container || (container == "" && i == 0) {
			return ct.Image
		}
	}
	return ""
}
