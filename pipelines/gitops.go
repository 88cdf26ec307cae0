package pipelines

import (
	"encoding/json"
	"fmt"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/render"
	"strings"
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
			return nil, fault.Permanent(fmt.Errorf("gitops options of %s: %w", app.Name, err))
		}
		opts = string(b)
	}
	return &GitOps{URL: g.URL, Branch: g.Branch, Paths: paths, Edit: g.Edit, EditOptions: opts, Secret: g.Secret}, nil
}

// GitSourceFor is what a git application's run in cluster renders: the
// commit named by ref (the rollout's repository@commit), nil for an image
// application.
func GitSourceFor(app config.Application, cluster, ref string) (*GitSource, error) {
	g := app.Git()
	if g == nil {
		return nil, nil
	}
	i := strings.LastIndex(ref, "@")
	commit := ref[i+1:]
	if i < 0 || commit == "" {
		return nil, fault.Permanent(fmt.Errorf("%s is not a revision of %s (repository@commit)", ref, app.Name))
	}
	src := &GitSource{URL: g.URL, Commit: commit, Render: g.Render, Secret: g.Secret, AllowedImages: g.AllowedImages}
	for _, p := range g.Paths {
		src.Paths = append(src.Paths, strings.ReplaceAll(p, "{cluster}", cluster))
	}
	if k := g.KubeCD; k != nil {
		env, ok := k.Environments[cluster]
		if !ok {
			return nil, fault.Permanent(fmt.Errorf("no KubeCD environment of %s is in cluster %s", app.Name, cluster))
		}
		b, err := json.Marshal(render.Chart{KubeCD: &render.KubeCDRelease{EnvironmentsFile: k.EnvironmentsFile, Environment: env, Release: k.Release}})
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("kubecd release of %s: %w", app.Name, err))
		}
		src.Helm = string(b)
	}
	if h := g.Helm; h != nil {
		c := render.Chart{Dir: h.Chart, ValuesFile: strings.ReplaceAll(h.ValuesFile, "{cluster}", cluster), Values: h.Values, ReleaseName: h.ReleaseName}
		for _, f := range h.DefaultValues {
			c.DefaultValues = append(c.DefaultValues, strings.ReplaceAll(f, "{cluster}", cluster))
		}
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fault.Permanent(fmt.Errorf("helm values of %s: %w", app.Name, err))
		}
		src.Helm = string(b)
	}
	return src, nil
}

// GitAuth returns the credentials of the repositories of cfg's
// applications (GitOps and git sources), by URL, for the embedded executor.
func GitAuth(cfg config.Provider) func(url string) (gitops.Auth, error) {
	return func(url string) (gitops.Auth, error) {
		for _, a := range cfg.Current().Applications {
			if g := a.Git(); g != nil && g.URL == url {
				return gitops.Auth{Username: g.Username, Password: g.PasswordValue, Token: g.TokenValue, SSHKeyFile: g.SSHKeyFile}, nil
			}
			if g := a.GitOps; g != nil && g.URL == url {
				return GitAuthOf(g), nil
			}
		}
		return gitops.Auth{}, nil
	}
}

// GitAuthOf is the credentials of a GitOps repository.
func GitAuthOf(g *config.GitOps) gitops.Auth {
	return gitops.Auth{Username: g.Username, Password: g.PasswordValue, Token: g.TokenValue, SSHKeyFile: g.SSHKeyFile}
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
