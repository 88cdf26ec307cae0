package gitops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrUnverified is a pushed commit the repository does not have on the
// pushed branch (or under the pushed tag): the push is not acted on.
var ErrUnverified = errors.New("commit not verified")

// Mirror keeps bare copies of repositories on disk, one per URL, fetched on
// demand: what verify reads pushes against and what a git application's
// manifests are rendered from. Safe for concurrent use; fetches of one
// repository take turns.
type Mirror struct {
	dir   string
	mu    sync.Mutex
	repos map[string]*mirrored
}

type mirrored struct {
	mu   sync.Mutex
	repo *git.Repository
}

// NewMirror keeps its copies under dir (created when missing).
func NewMirror(dir string) *Mirror {
	return &Mirror{dir: dir, repos: map[string]*mirrored{}}
}

// Commit is a verified commit.
type Commit struct {
	// Hash is the full commit id.
	Hash string
	// Changed are the paths the push changed (sorted): the difference
	// between before and the commit, or between the commit and its first
	// parent when before is unknown (or gone, after a force push).
	Changed []string
}

// VerifyPush fetches r and checks that commit is reachable from branch's
// head (ref refs/heads/<branch>) or is what tag names (refs/tags/<tag>).
// It returns the paths changed since before ("" or git's null id: since the
// commit's first parent). A commit the repository does not confirm is
// ErrUnverified, permanent.
func (m *Mirror) VerifyPush(ctx context.Context, r Repo, ref, before, commit string) (Commit, error) {
	mr, err := m.fetch(ctx, r)
	if err != nil {
		return Commit{}, err
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	where := redactURL(r.URL)
	c, err := mr.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil || !plumbing.IsHash(commit) {
		return Commit{}, permanentf("%w: %s has no commit %s", ErrUnverified, where, commit)
	}
	named, err := mr.repo.Reference(plumbing.ReferenceName(ref), true)
	if err != nil {
		return Commit{}, permanentf("%w: %s has no %s", ErrUnverified, where, ref)
	}
	switch {
	case plumbing.ReferenceName(ref).IsTag():
		target, err := peel(mr.repo, named.Hash())
		if err != nil || target != c.Hash {
			return Commit{}, permanentf("%w: tag %s of %s does not name commit %s", ErrUnverified, ref, where, commit)
		}
	default:
		head, err := mr.repo.CommitObject(named.Hash())
		if err != nil {
			return Commit{}, permanentf("%w: reading %s of %s: %w", ErrUnverified, ref, where, err)
		}
		if head.Hash != c.Hash {
			ok, err := c.IsAncestor(head)
			if err != nil {
				return Commit{}, fmt.Errorf("walking %s of %s: %w", ref, where, err)
			}
			if !ok {
				return Commit{}, permanentf("%w: commit %s is not on %s of %s (its head is %s)", ErrUnverified, commit, ref, where, head.Hash)
			}
		}
	}
	changed, err := changedPaths(ctx, mr.repo, before, c)
	if err != nil {
		return Commit{}, fmt.Errorf("diffing commit %s of %s: %w", commit, where, err)
	}
	return Commit{Hash: c.Hash.String(), Changed: changed}, nil
}

// Checkout writes the files of commit's tree under dir (which must be
// empty or missing), fetching r first when the copy lacks the commit.
func (m *Mirror) Checkout(ctx context.Context, r Repo, commit, dir string) error {
	mr, err := m.open(r)
	if err != nil {
		return err
	}
	if !mr.has(commit) {
		if mr, err = m.fetch(ctx, r); err != nil {
			return err
		}
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	c, err := mr.repo.CommitObject(plumbing.NewHash(commit))
	if err != nil || !plumbing.IsHash(commit) {
		return permanentf("%w: %s has no commit %s", ErrAccess, redactURL(r.URL), commit)
	}
	tree, err := c.Tree()
	if err != nil {
		return fmt.Errorf("reading the tree of %s: %w", commit, err)
	}
	return tree.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return writeFile(dir, f)
	})
}

// writeFile writes one file of a tree under dir (symbolic links are
// written as the file holding their target, as git does without symlink
// support: they are never followed out of dir).
func writeFile(dir string, f *object.File) error {
	name := filepath.Join(dir, filepath.FromSlash(f.Name))
	if !strings.HasPrefix(name, filepath.Clean(dir)+string(filepath.Separator)) {
		return permanentf("%w: tree entry %q leaves the checkout", ErrInvalid, f.Name)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	rd, err := f.Reader()
	if err != nil {
		return err
	}
	defer func() { _ = rd.Close() }()
	out, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, rd); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// peel follows annotated tags to the commit they name.
func peel(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		tag, err := repo.TagObject(h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return h, nil // a lightweight tag: h is the commit
		}
		if err != nil {
			return plumbing.ZeroHash, err
		}
		h = tag.Target
	}
	return plumbing.ZeroHash, errors.New("tags nested too deep")
}

// changedPaths lists the paths that differ between before (else c's first
// parent; else every file of c) and c.
func changedPaths(ctx context.Context, repo *git.Repository, before string, c *object.Commit) ([]string, error) {
	to, err := c.Tree()
	if err != nil {
		return nil, err
	}
	var from *object.Tree
	if b, err := repo.CommitObject(plumbing.NewHash(before)); err == nil && plumbing.IsHash(before) && strings.Trim(before, "0") != "" {
		if from, err = b.Tree(); err != nil {
			return nil, err
		}
	} else if c.NumParents() > 0 {
		p, err := c.Parent(0)
		if err != nil {
			return nil, err
		}
		if from, err = p.Tree(); err != nil {
			return nil, err
		}
	}
	if from == nil {
		var all []string
		err := to.Files().ForEach(func(f *object.File) error { all = append(all, f.Name); return nil })
		return all, err
	}
	changes, err := object.DiffTreeWithOptions(ctx, from, to, object.DefaultDiffTreeOptions)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range changes {
		for _, n := range []string{ch.From.Name, ch.To.Name} {
			if n != "" && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// open returns the copy of r, creating an empty one the first time.
func (m *Mirror) open(r Repo) (*mirrored, error) {
	key := mirrorKey(r.URL)
	m.mu.Lock()
	defer m.mu.Unlock()
	if mr, ok := m.repos[key]; ok {
		return mr, nil
	}
	path := filepath.Join(m.dir, key)
	repo, err := git.PlainOpen(path)
	if errors.Is(err, git.ErrRepositoryNotExists) {
		if repo, err = git.PlainInit(path, true); err == nil {
			_, err = repo.CreateRemote(&gitconfig.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{r.URL}})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening the copy of %s in %s: %w", redactURL(r.URL), path, err)
	}
	mr := &mirrored{repo: repo}
	m.repos[key] = mr
	return mr, nil
}

// has tells whether the copy holds commit.
func (mr *mirrored) has(commit string) bool {
	mr.mu.Lock()
	defer mr.mu.Unlock()
	_, err := mr.repo.CommitObject(plumbing.NewHash(commit))
	return err == nil
}

// mirrorRefSpecs fetch every branch and tag as they are on the remote.
var mirrorRefSpecs = []gitconfig.RefSpec{"+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"}

// fetch brings the copy of r up to date with the remote.
func (m *Mirror) fetch(ctx context.Context, r Repo) (*mirrored, error) {
	mr, err := m.open(r)
	if err != nil {
		return nil, err
	}
	auth, err := r.Auth.method()
	if err != nil {
		return nil, err
	}
	mr.mu.Lock()
	defer mr.mu.Unlock()
	err = mr.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName, RemoteURL: r.URL, RefSpecs: mirrorRefSpecs,
		Auth: auth, Force: true, Prune: true, Tags: git.NoTags,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil, scrub(classify(ctx, fmt.Errorf("fetching %s: %w", redactURL(r.URL), err)), r.secrets())
	}
	return mr, nil
}

// mirrorKey names the copy of a repository: a hash of its URL without
// credentials.
func mirrorKey(url string) string {
	sum := sha256.Sum256([]byte(redactURL(url)))
	return hex.EncodeToString(sum[:12])
}
