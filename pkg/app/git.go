package app

import (
	"context"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
)

// gitSources confirms git pushes against flotilla's copies of the
// repositories (verify's GitRepos).
type gitSources struct{ mirror *gitops.Mirror }

func (g gitSources) VerifyPush(ctx context.Context, src config.GitSource, ref, before, commit string) ([]string, error) {
	c, err := g.mirror.VerifyPush(ctx, SourceRepo(src), ref, before, commit)
	return c.Changed, err
}

// SourceRepo is the repository of a git source, with its credentials.
func SourceRepo(src config.GitSource) gitops.Repo {
	return gitops.Repo{URL: src.URL, Branch: src.Branch, Auth: gitops.Auth{
		Username: src.Username, Password: src.PasswordValue, Token: src.TokenValue, SSHKeyFile: src.SSHKeyFile,
	}}
}
