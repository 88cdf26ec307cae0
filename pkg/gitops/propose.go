package gitops

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Proposal is one pull request's worth of bumps: every change committed
// together on a branch cut from the repository's branch (the base).
type Proposal struct {
	// Branch is the branch to push the commit to, e.g.
	// "flotilla/api-1a2b3c/2". It must not be the base.
	Branch string
	// Changes are the bumps, one per image: a wave rolls one image out to
	// its clusters' files, a revert each cluster's previous image.
	Changes []Change
	// Message is the commit message. Default: the first change's
	// CommitMessage.
	Message string
}

// Proposed says what Propose did.
type Proposed struct {
	// Base is the base branch's head the branch was cut from, BaseBranch
	// its name (the remote's default branch when the Repo names none).
	Base       string
	BaseBranch string
	// Commit is the head of the proposal's branch: pushed now, or found
	// there already holding every change. Empty when Unchanged.
	Commit string
	// Pushed tells whether this call pushed the branch (false when the
	// branch already held the changes: a repeated Propose pushes nothing).
	Pushed bool
	// Unchanged: the base already holds every change, so there is nothing
	// to propose and no branch was pushed.
	Unchanged bool
	// Files are the paths the proposal changes.
	Files []string
}

// Propose commits the changes on a branch cut from the head of r's branch
// and pushes it (forced: the branch is flotilla's own), for a pull request
// to merge into the base.
//
// It is idempotent: when the branch exists and, applied to its head, the
// changes change nothing while the base is an ancestor of it, that head is
// the proposal and nothing is pushed. When the base already holds every
// change, nothing is pushed and the result is Unchanged.
//
// Errors are classified as Bump's are; messages never show credentials.
func Propose(ctx context.Context, r Repo, p Proposal, opts ...Option) (Proposed, error) {
	res, err := propose(ctx, r, p, newOptions(opts))
	return res, scrub(err, r.secrets())
}

func propose(ctx context.Context, r Repo, p Proposal, o options) (Proposed, error) {
	if err := validateProposal(r, p); err != nil {
		return Proposed{}, err
	}
	auth, err := r.Auth.method()
	if err != nil {
		return Proposed{}, err
	}
	w, err := clone(ctx, r, auth)
	if err != nil {
		return Proposed{}, fmt.Errorf("cloning %s: %w", redactURL(r.URL), classify(ctx, err))
	}
	if p.Branch == w.branch.Short() {
		return Proposed{}, permanentf("%w: the proposal's branch %q is the base", ErrInvalid, p.Branch)
	}
	base := w.base
	res := Proposed{Base: base.String(), BaseBranch: w.branch.Short()}
	files, err := w.applyAll(p.Changes)
	if err != nil {
		return Proposed{}, err
	}
	if len(files) == 0 {
		res.Unchanged = true
		return res, nil
	}
	res.Files = files

	msg := p.Message
	if msg == "" {
		msg = p.Changes[0].CommitMessage()
	}
	author := object.Signature{Name: or(r.Author.Name, "flotilla"), Email: or(r.Author.Email, "flotilla@localhost"), When: o.now()}
	commit, err := w.wt.Commit(msg, &git.CommitOptions{Author: &author})
	if err != nil {
		return Proposed{}, fmt.Errorf("committing: %w", err)
	}

	// The branch may be there from an earlier call: keep it when it is one
	// commit on the base with this same tree.
	target := plumbing.NewBranchReferenceName(p.Branch)
	head, ok, err := w.fetchBranch(ctx, target)
	if err != nil {
		return Proposed{}, fmt.Errorf("fetching %s of %s: %w", p.Branch, w.where, classify(ctx, err))
	}
	if ok && w.sameProposal(head, commit, base) {
		res.Commit = head.String()
		return res, nil
	}
	spec := config.RefSpec("+" + w.branch.String() + ":" + target.String()) // the base's local ref is at commit
	err = w.repo.PushContext(ctx, &git.PushOptions{RemoteName: git.DefaultRemoteName, RefSpecs: []config.RefSpec{spec}, Auth: w.auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return Proposed{}, fmt.Errorf("pushing %s to %s: %w", p.Branch, w.where, classify(ctx, err))
	}
	res.Commit, res.Pushed = commit.String(), true
	return res, nil
}

// Holds tells whether the head of r's branch already holds every change
// (after a pull request merged, say), and returns that head.
func Holds(ctx context.Context, r Repo, changes []Change) (bool, string, error) {
	held, head, err := holds(ctx, r, changes)
	return held, head, scrub(err, r.secrets())
}

func holds(ctx context.Context, r Repo, changes []Change) (bool, string, error) {
	if len(changes) == 0 {
		return false, "", permanentf("%w: no changes", ErrInvalid)
	}
	for _, c := range changes {
		if err := validate(r, c); err != nil {
			return false, "", err
		}
	}
	auth, err := r.Auth.method()
	if err != nil {
		return false, "", err
	}
	w, err := clone(ctx, r, auth)
	if err != nil {
		return false, "", fmt.Errorf("cloning %s: %w", redactURL(r.URL), classify(ctx, err))
	}
	files, err := w.applyAll(changes)
	if err != nil {
		return false, "", err
	}
	return len(files) == 0, w.base.String(), nil
}

func validateProposal(r Repo, p Proposal) error {
	b := strings.TrimPrefix(p.Branch, "refs/heads/")
	if b == "" || !plumbing.NewBranchReferenceName(b).IsBranch() || strings.ContainsAny(b, " ~^:?*[\\") ||
		strings.Contains(b, "..") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") {
		return permanentf("%w: branch name %q", ErrInvalid, p.Branch)
	}
	if len(p.Changes) == 0 {
		return permanentf("%w: no changes to propose", ErrInvalid)
	}
	for _, c := range p.Changes {
		if err := validate(r, c); err != nil {
			return err
		}
	}
	return nil
}

// applyAll applies every change to the worktree and returns the paths
// changed, sorted.
func (w *workspace) applyAll(changes []Change) ([]string, error) {
	var files []string
	for _, c := range changes {
		changed, err := w.apply(c)
		if err != nil {
			return nil, err
		}
		for _, f := range changed {
			if !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	slices.Sort(files)
	return files, nil
}

// fetchBranch fetches ref from the remote (with enough history to tell
// whether it starts from the base) and returns its head, or false when the
// remote has no such branch.
func (w *workspace) fetchBranch(ctx context.Context, ref plumbing.ReferenceName) (plumbing.Hash, bool, error) {
	remote, err := w.repo.Remote(git.DefaultRemoteName)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: w.auth})
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	i := slices.IndexFunc(refs, func(r *plumbing.Reference) bool { return r.Name() == ref })
	if i < 0 {
		return plumbing.ZeroHash, false, nil
	}
	head := refs[i].Hash()
	local := plumbing.ReferenceName("refs/flotilla/proposal")
	err = w.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{config.RefSpec("+" + ref.String() + ":" + local.String())},
		Depth:      2, Auth: w.auth, Tags: git.NoTags, Force: true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, false, err
	}
	return head, true, nil
}

// sameProposal tells whether head is, like commit, one commit on base with
// commit's tree: the proposal pushed before.
func (w *workspace) sameProposal(head, commit, base plumbing.Hash) bool {
	h, err := w.repo.CommitObject(head)
	if err != nil {
		return false // not fetched whole: propose anew
	}
	c, err := w.repo.CommitObject(commit)
	if err != nil {
		return false
	}
	return len(h.ParentHashes) == 1 && h.ParentHashes[0] == base && h.TreeHash == c.TreeHash
}
