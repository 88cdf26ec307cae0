package pipelines

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
)

// GitOpsFor returns where app's image lives for cluster ("{cluster}" in its
// paths replaced), or nil when app is not GitOps-managed.
func GitOpsFor(app config.Application, cluster string) (*GitOps, error) {
	g := app.GitOps
	if g == nil {
		return nil, nil
	}
	paths := make([]string, len(g.Paths))
	for i, p := range g.Paths {
		paths[i] = strings.ReplaceAll(p, "{cluster}", cluster)
	}
	opts := ""
	if len(g.Options) > 0 {
		b, err := json.Marshal(g.Options)
		if err != nil {
			return nil, events.Permanent(fmt.Errorf("gitops options of %s: %w", app.Name, err))
		}
		opts = string(b)
	}
	return &GitOps{URL: g.URL, Branch: g.Branch, Paths: paths, Edit: g.Edit, EditOptions: opts, Secret: g.Secret}, nil
}

// GitAuth returns the credentials of the GitOps repositories of cfg's
// applications, by URL, for the embedded executor.
func GitAuth(cfg *config.Config) func(url string) (gitops.Auth, error) {
	return func(url string) (gitops.Auth, error) {
		for _, a := range cfg.Applications {
			g := a.GitOps
			if g == nil || g.URL != url {
				continue
			}
			return gitops.Auth{
				Username: g.Username, Password: g.PasswordValue, Token: g.TokenValue, SSHKeyFile: g.SSHKeyFile,
			}, nil
		}
		return gitops.Auth{}, nil
	}
}

// GitImage is the image a GitOps bump writes: the rollout's digest with
// its tag, so the repository and the commit name the version.
func GitImage(ref, tag string) string {
	repo, digest, ok := strings.Cut(ref, "@")
	if !ok || tag == "" {
		return ref
	}
	return repo + ":" + tag + "@" + digest
}
