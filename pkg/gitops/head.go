package gitops

import (
	"context"
	"fmt"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Head is the commit r's branch points at on the remote now, as `git
// ls-remote` lists it: the refs are read, nothing is fetched. A branch the
// remote does not have is ErrUnverified, permanent.
func Head(ctx context.Context, r Repo) (string, error) {
	auth, err := r.Auth.method()
	if err != nil {
		return "", err
	}
	branch := or(r.Branch, "main")
	rem := git.NewRemote(memory.NewStorage(), &gitconfig.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{r.URL}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{Auth: auth})
	if err != nil {
		return "", scrub(classify(ctx, fmt.Errorf("listing the refs of %s: %w", redactURL(r.URL), err)), r.secrets())
	}
	want := plumbing.NewBranchReferenceName(branch)
	for _, ref := range refs {
		if ref.Name() == want && ref.Type() == plumbing.HashReference {
			return ref.Hash().String(), nil
		}
	}
	return "", permanentf("%w: %s has no branch %s", ErrUnverified, redactURL(r.URL), branch)
}
