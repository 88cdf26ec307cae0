package app

import (
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fleetmetrics"
)

// applicationInfos are cfg's applications as the API's applications name
// them.
func applicationInfos(cfg *config.Config) []api.ApplicationInfo {
	out := make([]api.ApplicationInfo, 0, len(cfg.Applications))
	for _, a := range cfg.Applications {
		in := api.ApplicationInfo{Name: a.Name, Kind: api.KindImage, Repository: a.Image, PollInterval: cfg.PollInterval(a)}
		if g := a.Git(); g != nil {
			in.Kind, in.Repository, in.Branch = api.KindGit, config.DisplayURL(g.URL), g.Branch
		}
		out = append(out, in)
	}
	return out
}

// silenceMetric registers flotilla_application_webhook_silent, reported
// (in scale-out mode) by the holder of partition 0, as the fleet's other
// metrics.
func (s *Server) silenceMetric(cfg *config.Config, o Options) error {
	var active func() bool
	if sh, ok := s.dispatch.(*sharedEngine); ok {
		active = func() bool { return sh.held(0) }
	}
	names := make([]string, 0, len(cfg.Applications))
	for _, a := range cfg.Applications {
		names = append(names, a.Name)
	}
	_, err := fleetmetrics.NewSilence(s.repo, names, o.Registerer, active, o.Logger)
	return err
}
