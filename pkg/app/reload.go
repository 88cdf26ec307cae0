package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/reload"
)

// newReloader builds the one swap of the config in force (pkg/reload):
// every consumer built in build reads s.live per event (the functions,
// the pipelines' runner, the proposer and the triggers, verify's tracked
// images and signed applications, the gates' validation policies, the
// embedded executor's git credentials, resync, the poll, which starts and
// stops its loops on the swap, and the reconcile); the API's lists of
// applications and clusters and the clusters' clients follow here
// (clusters.go). What build made once from the start-up config (listener,
// store or bus, intake, tokens, authorization, registries, executor,
// signature policies) is what config.RestartFields refuses to change live.
func (s *Server) newReloader(o Options) (*reload.Reloader, error) {
	ro := reload.Options{Logger: o.Logger, Metrics: o.Registerer, Now: o.Clock.Now,
		Follow: func(ctx context.Context, source string, next *config.Config) {
			s.followClusters(ctx, source, next)
			s.api.SetCatalogue(applicationInfos(next), clusterInfos(next.Fleet))
		},
		Guard: func(ctx context.Context, old, next *config.Config) error {
			if err := s.removable(ctx, old, next); err != nil {
				return err
			}
			return clustersLoad(old, next)
		},
	}
	// The file's reloads keep the resources' applications and the
	// discovered clusters.
	ro.Load = s.load
	return reload.New(s.live, ro)
}

// removable refuses to remove an application while a rollout of it is in
// flight: its next steps (an apply, a revert) would find it gone and the
// rollout could neither finish nor roll back.
func (s *Server) removable(ctx context.Context, old, next *config.Config) error {
	var gone []string
	for _, a := range old.Applications {
		if _, ok := next.Application(a.Name); !ok {
			gone = append(gone, a.Name)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	ros, err := s.repo.ListInFlight(ctx)
	if err != nil {
		return fmt.Errorf("reading the rollouts in flight: %w", err)
	}
	var busy []string
	for _, ro := range ros {
		if slices.Contains(gone, ro.Application) {
			busy = append(busy, fmt.Sprintf("applications[%s]: removed while its rollout %s is in flight (abort it or let it end first)", ro.Application, ro.ID))
		}
	}
	if len(busy) > 0 {
		return errors.New(strings.Join(busy, "; "))
	}
	return nil
}

// Reload loads the config file again (config.Load: what `flotilla config
// check` runs) and swaps it in when valid and when it needs no restart
// (pkg/reload); Run does it when the file changes and on Options.Hangup.
func (s *Server) Reload(ctx context.Context, path string) reload.Result {
	return s.reloader.Reload(ctx, "request", func() (*config.Config, error) { return s.load(path) })
}
