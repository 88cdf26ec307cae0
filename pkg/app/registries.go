package app

import (
	"context"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/registry"
)

// newRemote is the registry client of cfg: its registries' credentials
// (Docker config files, cloud providers), then the user's Docker config.
func newRemote(ctx context.Context, cfg *config.Config) (*registry.Remote, error) {
	var c registry.Credentials
	if r := cfg.Registries; r != nil {
		c = registry.Credentials{DockerConfigFiles: r.DockerConfigFiles, Providers: r.Providers}
	}
	kc, err := registry.NewKeychain(ctx, c)
	if err != nil {
		return nil, err
	}
	return registry.NewRemote(registry.WithKeychain(kc)), nil
}
