package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// discoveryListTimeout bounds the wait, at start-up, for the first list
// of the discovered clusters; past it flotilla serves the file's clusters
// and takes the discovered ones once they are listed.
const discoveryListTimeout = 30 * time.Second

// newDiscovery is the source of the clusters fleet.discovery.argocd names
// (pkg/discovery): Argo CD's cluster Secrets in the management cluster
// its kubeconfig names, else the pod's own.
func (s *Server) newDiscovery(a config.ArgoCDDiscovery, o Options, m *discovery.Metrics) (*discovery.Source, error) {
	if o.ConfigFile == "" {
		return nil, fmt.Errorf("fleet.discovery: the discovered clusters join a configuration file that reloads (flotilla serve --config)")
	}
	var rc *rest.Config
	var err error
	if a.Kubeconfig != "" {
		rc, err = kube.RESTConfig(a.Kubeconfig, "")
	} else if rc, err = rest.InClusterConfig(); err != nil {
		err = fmt.Errorf("fleet.discovery.argocd: no kubeconfig, and not in a pod with a service account token: %w", err)
	}
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("fleet.discovery.argocd: %w", err)
	}
	return discovery.New(discovery.Options{Client: kc, ArgoCD: a, Logger: o.Logger, Metrics: m,
		Build: func() (*config.Config, error) { return s.load(o.ConfigFile) }})
}

// load builds the configuration of the file at path with what the other
// sources add: the Application resources' applications (their Build) and
// the discovered clusters.
func (s *Server) load(path string) (*config.Config, error) {
	if s.resources != nil {
		return s.resources.Build(path)
	}
	if s.discovery == nil {
		return config.Load(path)
	}
	c, _, err := config.LoadExtra(path, config.Extra{Clusters: s.discovery.Clusters()})
	return c, err
}

// discoveredClusters are the clusters discovered now, for the Application
// resources' Build; none without fleet.discovery.
func (s *Server) discoveredClusters() []config.Cluster {
	if s.discovery == nil {
		return nil
	}
	return s.discovery.Clusters()
}

// startDiscovery lists the discovered clusters and swaps them in, before
// the start-up prune and the resources.
func (s *Server) startDiscovery(ctx context.Context) {
	if s.discovery == nil {
		return
	}
	if err := s.discovery.Start(ctx, discoveryListTimeout); err != nil {
		s.log.ErrorContext(ctx, "cluster discovery: serving the file's clusters only until the discovered ones are listed", "error", err)
		return
	}
	s.discovery.Sync(ctx, s.reloader)
}
