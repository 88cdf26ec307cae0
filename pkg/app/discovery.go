package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// discoveryListTimeout bounds the wait, at start-up, for the first list
// of the discovered clusters; past it flotilla serves the file's clusters
// and takes the discovered ones once they are listed.
const discoveryListTimeout = 30 * time.Second

// newDiscovery is the source of the clusters fleet.discovery names
// (pkg/discovery): Argo CD's cluster Secrets, the ClusterProfiles and
// Cluster API's Clusters in
// the management cluster each one's kubeconfig names, else the pod's own.
func (s *Server) newDiscovery(d config.Discovery, o Options, m *discovery.Metrics) (*discovery.Source, error) {
	if o.ConfigFile == "" {
		return nil, fmt.Errorf("fleet.discovery: the discovered clusters join a configuration file that reloads (flotilla serve --config)")
	}
	var invs []discovery.Inventory
	if a := d.ArgoCD; a != nil {
		rc, err := managementConfig("fleet.discovery.argocd", a.Kubeconfig)
		if err != nil {
			return nil, err
		}
		kc, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("fleet.discovery.argocd: %w", err)
		}
		inv, err := discovery.ArgoCD(kc, *a)
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	if c := d.ClusterProfiles; c != nil {
		rc, err := managementConfig("fleet.discovery.clusterProfiles", c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		dc, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("fleet.discovery.clusterProfiles: %w", err)
		}
		inv, err := discovery.ClusterProfiles(dc, *c)
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	if c := d.ClusterAPI; c != nil {
		rc, err := managementConfig("fleet.discovery.clusterAPI", c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		kc, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("fleet.discovery.clusterAPI: %w", err)
		}
		mc, err := metadata.NewForConfig(rc)
		if err != nil {
			return nil, fmt.Errorf("fleet.discovery.clusterAPI: %w", err)
		}
		inv, err := discovery.ClusterAPI(kc, mc, *c)
		if err != nil {
			return nil, err
		}
		invs = append(invs, inv)
	}
	return discovery.New(discovery.Options{Inventories: invs, Logger: o.Logger, Metrics: m,
		Build: func() (*config.Config, error) { return s.load(o.ConfigFile) }})
}

// managementConfig is the client configuration of the management cluster
// kubeconfig names, else the pod's own.
func managementConfig(field, kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return kube.RESTConfig(kubeconfig, "")
	}
	rc, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("%s: no kubeconfig, and not in a pod with a service account token: %w", field, err)
	}
	return rc, nil
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
