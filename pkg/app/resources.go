package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/kube"
	"github.com/flotilla-cd/flotilla/pkg/resources"
)

// resourcesListTimeout bounds the wait, at start-up, for the first list
// of the Application resources; past it flotilla serves the file's
// applications, skips the start-up prune (which would remove what the
// resources' applications created) and takes the resources once they
// are listed.
const resourcesListTimeout = 30 * time.Second

// newResources is the source of the Application resources
// server.resources names (pkg/resources): in the management cluster its
// kubeconfig names, else the pod's own; joined to the config file.
func (s *Server) newResources(r *config.Resources, o Options) (*resources.Source, error) {
	if o.ConfigFile == "" {
		return nil, fmt.Errorf("server.resources: the Application resources join a configuration file that reloads (flotilla serve --config)")
	}
	var rc *rest.Config
	var err error
	if r.Kubeconfig != "" {
		rc, err = kube.RESTConfig(r.Kubeconfig, "")
	} else if rc, err = rest.InClusterConfig(); err != nil {
		err = fmt.Errorf("server.resources: no kubeconfig, and not in a pod with a service account token: %w", err)
	}
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("server.resources: %w", err)
	}
	return resources.New(resources.Options{Client: dyn, Namespaces: r.Namespaces, PlatformNamespaces: r.PlatformNamespaces, Path: o.ConfigFile, Live: s.live, Logger: o.Logger,
		Clusters: s.discoveredClusters}), nil
}

// startResources lists the Application resources and swaps their
// applications in, before the start-up prune; false when they could not
// be listed in time (the prune is skipped then).
func (s *Server) startResources(ctx context.Context) bool {
	if s.resources == nil {
		return true
	}
	if err := s.resources.Start(ctx, resourcesListTimeout); err != nil {
		s.log.ErrorContext(ctx, "management cluster resources: serving the file's applications and clusters only until the resources are listed; the start-up prune is skipped", "error", err)
		return false
	}
	s.resources.Sync(ctx, s.reloader, true)
	return true
}

// runResources follows the resources (every replica: each holds the
// configuration in force) and, once, writes their statuses.
func (s *Server) runResources(ctx context.Context) error {
	return s.resources.Run(ctx, s.reloader)
}

func (s *Server) runResourceStatuses(ctx context.Context) error {
	return s.resources.RunStatus(ctx, resources.StatusOptions{Apps: s.repo, Rollouts: s.repo, Journal: s.bus})
}
