package app

import (
	"context"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/poll"
	"github.com/flotilla-cd/flotilla/pkg/registry"
)

// newPoller builds the registries' and branches' poll (pkg/poll) on the
// resolver when it lists tags too (registry.Remote), else on a client of
// cfg's registries, and on git ls-remote for git applications.
// In scale-out mode a replica polls the applications whose pushes fall in
// the partitions it holds (the replica that plans them), so that the
// replicas share the polls and none is polled twice.
func (s *Server) newPoller(ctx context.Context, cfg *config.Config, resolver registry.Resolver, o Options) (*poll.Poller, error) {
	reg, ok := resolver.(poll.Registry)
	if !ok {
		remote, err := newRemote(ctx, cfg)
		if err != nil {
			return nil, err
		}
		reg = remote
	}
	// The applications polled are those in force: a reload starts and
	// stops their loops.
	po := poll.Options{Logger: o.Logger, Metrics: o.Registerer, Heads: gitHeads{}, Changed: s.live.Changed}
	if shared, ok := s.dispatch.(*sharedEngine); ok {
		po.Owns = func(a config.Application) bool {
			key := dispatch.ImageKey(a.Image)
			if g := a.Git(); g != nil {
				key = dispatch.GitKey(config.DisplayURL(g.URL))
			}
			return shared.held(s.scale.bus.PartitionOf(key))
		}
	}
	return poll.New(s.live, reg, s.repo, journal{s.bus}, po)
}

// gitHeads reads git applications' branch heads for the poll, with their
// sources' credentials.
type gitHeads struct{}

func (gitHeads) Head(ctx context.Context, src config.GitSource) (string, error) {
	return gitops.Head(ctx, SourceRepo(src))
}

// refresher is the API's refresh on the poll.
type refresher struct{ p *poll.Poller }

func (r refresher) Refresh(ctx context.Context, app string) (api.RefreshResponse, error) {
	res, err := r.p.Poll(ctx, app)
	if err != nil {
		return api.RefreshResponse{}, err
	}
	return RefreshResponse(res), nil
}

// RefreshResponse is the API's answer of what poll res found.
func RefreshResponse(res poll.Result) api.RefreshResponse {
	out := api.RefreshResponse{Application: res.Application, Image: res.Image, Tags: res.Tags, Newest: res.Newest,
		Digest: res.Digest, Started: res.Started, EventID: res.EventID, Reason: res.Reason, At: res.At}
	for _, m := range res.Members {
		out.Members = append(out.Members, api.RefreshMember{Application: m.Application, Image: m.Image, Tags: m.Tags, Newest: m.Newest,
			Digest: m.Digest, Started: m.Started, EventID: m.EventID, Reason: m.Reason})
	}
	return out
}
