package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Repo is the deployments repository an application lives in.
type Repo struct {
	// URL is anything go-git clones: https://, ssh://, user@host:path,
	// file:// or a local path.
	URL string
	// Branch is the branch to bump. Default: the remote's default branch.
	Branch string
	// Auth is how to authenticate. Default none.
	Auth Auth
	// Author signs the commits. Default "flotilla" <flotilla@localhost>.
	Author Author
}

// Author is a commit's author and committer.
type Author struct {
	Name  string
	Email string
}

// File is one file to edit, by its slash-separated path relative to the
// repository's root.
type File struct {
	Path string
	Edit Edit
}

// Change is one bump: the image to write into the files, and who asked.
type Change struct {
	// App names the application in the commit message. Default the last
	// element of the image repository.
	App string
	// Rollout is the id of the rollout the bump belongs to, for the commit
	// message.
	Rollout string
	Image   Image
	Files   []File
	// Message is the commit message. Default CommitMessage's.
	Message string
}

// Result says what Bump did.
type Result struct {
	// Commit is the hash of the commit pushed or, when nothing changed, of
	// the branch head the files already matched on.
	Commit string
	// Changed tells whether a commit was pushed.
	Changed bool
	// Files are the paths the commit changed.
	Files []string
	// Attempts counts the rounds of edit, commit and push (1 unless the
	// branch moved under the bump).
	Attempts int
}

// CommitMessage is the default commit message: a subject naming the
// application, the version and the rollout, and trailers with the full image
// reference and the rollout id.
//
//	flotilla: api 1.4.2 (rollout r-abc)
//
//	Image: registry.example.com/team/api:1.4.2@sha256:...
//	Rollout: r-abc
func (c Change) CommitMessage() string {
	app := c.App
	if app == "" {
		app = path.Base(c.Image.Repository)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "flotilla: %s %s", app, c.Image.Version())
	if c.Rollout != "" {
		fmt.Fprintf(&b, " (rollout %s)", c.Rollout)
	}
	fmt.Fprintf(&b, "\n\nImage: %s\n", c.Image.Reference())
	if c.Rollout != "" {
		fmt.Fprintf(&b, "Rollout: %s\n", c.Rollout)
	}
	return b.String()
}

// Bump writes c.Image into c.Files on the branch of r and pushes the commit.
//
// It clones the branch shallowly into memory, applies every edit and, when
// one changed something, commits and pushes. When nothing changed it pushes
// nothing and says so: bumping again to the same image is a no-op. When the
// push is refused because the branch moved, it fetches the new head, resets
// onto it, applies the edits again and pushes again, up to WithAttempts
// times with jittered backoff in between, so concurrent bumps of one
// repository keep each other's commits.
//
// Errors: IsPermanent for bad input, a missing file, an edit that cannot be
// made, a repository or branch that does not exist or refuses the
// credentials; ErrConflict (retryable) when the branch kept moving through
// every attempt; network errors and ctx's own error are retryable too.
// Messages never show the credentials.
func Bump(ctx context.Context, r Repo, c Change, opts ...Option) (Result, error) {
	res, err := bump(ctx, r, c, newOptions(opts))
	return res, scrub(err, r.secrets())
}

func bump(ctx context.Context, r Repo, c Change, o options) (Result, error) {
	if err := validate(r, c); err != nil {
		return Result{}, err
	}
	auth, err := r.Auth.method()
	if err != nil {
		return Result{}, err
	}
	w, err := clone(ctx, r, auth)
	if err != nil {
		return Result{}, fmt.Errorf("cloning %s: %w", redactURL(r.URL), classify(ctx, err))
	}
	msg := c.Message
	if msg == "" {
		msg = c.CommitMessage()
	}
	author := object.Signature{Name: or(r.Author.Name, "flotilla"), Email: or(r.Author.Email, "flotilla@localhost")}
	for attempt := 1; ; attempt++ {
		res, err := w.try(ctx, c, msg, author, o, attempt)
		if !errors.Is(err, errMoved) {
			return res, err
		}
	}
}

// errMoved says that the branch moved under a push and the worktree is now
// reset onto its new head, ready for another attempt.
var errMoved = errors.New("branch moved")

// try is one attempt: apply the edits, commit what changed, push.
func (w *workspace) try(ctx context.Context, c Change, msg string, author object.Signature, o options, attempt int) (Result, error) {
	failed := Result{Attempts: attempt}
	unchanged := Result{Commit: w.base.String(), Attempts: attempt}
	files, err := w.apply(c)
	if err != nil {
		return failed, err
	}
	if len(files) == 0 {
		return unchanged, nil
	}
	author.When = o.now()
	commit, err := w.wt.Commit(msg, &git.CommitOptions{Author: &author})
	if errors.Is(err, git.ErrEmptyCommit) { // edits that undid each other
		return unchanged, nil
	}
	if err != nil {
		return failed, fmt.Errorf("committing: %w", err)
	}
	if o.beforePush != nil {
		o.beforePush(ctx, attempt)
	}
	done := Result{Commit: commit.String(), Changed: true, Files: files, Attempts: attempt}
	pushErr := w.push(ctx)
	if pushErr == nil {
		return done, nil
	}
	pushErr = classify(ctx, pushErr)
	if ctx.Err() != nil || IsPermanent(pushErr) {
		return failed, fmt.Errorf("pushing to %s: %w", w.where, pushErr)
	}

	// Find out why the push failed: a branch that moved is a race to
	// rebase and retry; anything else goes back to the caller. Backing off
	// first spreads the contenders out, and lets a push that held the
	// branch's lock (and got ours refused) finish before we look.
	if attempt < o.attempts {
		if err := o.wait(ctx, attempt); err != nil {
			return failed, fmt.Errorf("pushing to %s: %w (after %w)", w.where, err, pushErr)
		}
	}
	head, err := w.fetch(ctx)
	switch {
	case err != nil || head == w.base:
		return failed, fmt.Errorf("pushing to %s: %w", w.where, pushErr)
	case head == commit: // the push landed after all
		return done, nil
	case attempt >= o.attempts:
		return failed, fmt.Errorf("pushing to %s: %w (%d attempts): %w", w.where, ErrConflict, attempt, pushErr)
	}
	if err := w.reset(head); err != nil {
		return failed, fmt.Errorf("resetting onto %s: %w", head, err)
	}
	return failed, errMoved
}

func validate(r Repo, c Change) error {
	if r.URL == "" {
		return permanentf("%w: no repository URL", ErrInvalid)
	}
	if len(c.Files) == 0 {
		return permanentf("%w: no files to edit", ErrInvalid)
	}
	for _, f := range c.Files {
		p := path.Clean(f.Path)
		if f.Path == "" || p == "." || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return permanentf("%w: file path %q: want a relative path inside the repository", ErrInvalid, f.Path)
		}
		if f.Edit == nil {
			return permanentf("%w: file %s has no edit", ErrInvalid, f.Path)
		}
	}
	return c.Image.Validate()
}

// classify marks what retrying cannot fix as permanent, and prefers ctx's
// error to whatever the transport made of a cancellation.
func classify(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%w (%w)", ctxErr, err)
	}
	switch {
	case errors.Is(err, transport.ErrRepositoryNotFound),
		errors.Is(err, transport.ErrEmptyRemoteRepository),
		errors.Is(err, transport.ErrAuthenticationRequired),
		errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod),
		errors.Is(err, git.NoMatchingRefSpecError{}),
		errors.Is(err, plumbing.ErrReferenceNotFound):
		return fault.Permanent(fmt.Errorf("%w: %w", ErrAccess, err))
	}
	return err
}

// workspace is one in-memory clone of the branch.
type workspace struct {
	repo   *git.Repository
	wt     *git.Worktree
	branch plumbing.ReferenceName
	auth   transport.AuthMethod
	where  string        // the URL without credentials, for messages
	base   plumbing.Hash // the remote head the worktree was reset to
}

func clone(ctx context.Context, r Repo, auth transport.AuthMethod) (*workspace, error) {
	opts := &git.CloneOptions{URL: r.URL, Auth: auth, SingleBranch: true, Depth: 1, Tags: git.NoTags}
	if r.Branch != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(r.Branch)
	}
	repo, err := git.CloneContext(ctx, memory.NewStorage(), memfs.New(), opts)
	if err != nil {
		return nil, err
	}
	head, err := repo.Head()
	if err != nil {
		return nil, err
	}
	if !head.Name().IsBranch() {
		return nil, fmt.Errorf("remote HEAD is not a branch: %s", head.Name())
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	return &workspace{repo: repo, wt: wt, branch: head.Name(), auth: auth, where: redactURL(r.URL), base: head.Hash()}, nil
}

// apply runs the edits on the worktree and stages what changed; it returns
// the changed paths.
func (w *workspace) apply(c Change) ([]string, error) {
	var changed []string
	for _, f := range c.Files {
		f.Path = path.Clean(f.Path) // "./apps/api.yaml" is "apps/api.yaml"
		src, err := util.ReadFile(w.wt.Filesystem, f.Path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, permanentf("editing %s: %w on branch %s", f.Path, ErrFileNotFound, w.branch.Short())
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", f.Path, err)
		}
		out, ok, err := f.Edit.Apply(src, c.Image)
		if err != nil {
			return nil, fmt.Errorf("editing %s: %w", f.Path, err)
		}
		if !ok {
			continue
		}
		if err := util.WriteFile(w.wt.Filesystem, f.Path, out, 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", f.Path, err)
		}
		if err := w.wt.AddWithOptions(&git.AddOptions{Path: f.Path, SkipStatus: true}); err != nil {
			return nil, fmt.Errorf("staging %s: %w", f.Path, err)
		}
		if !slices.Contains(changed, f.Path) {
			changed = append(changed, f.Path)
		}
	}
	return changed, nil
}

func (w *workspace) push(ctx context.Context) error {
	spec := config.RefSpec(w.branch + ":" + w.branch)
	return w.repo.PushContext(ctx, &git.PushOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{spec},
		Auth:       w.auth,
	})
}

// fetch fetches the branch's head, shallowly, and returns its hash.
func (w *workspace) fetch(ctx context.Context) (plumbing.Hash, error) {
	remote := plumbing.NewRemoteReferenceName(git.DefaultRemoteName, w.branch.Short())
	spec := config.RefSpec("+" + w.branch + ":" + remote)
	err := w.repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName: git.DefaultRemoteName,
		RefSpecs:   []config.RefSpec{spec},
		Depth:      1,
		Auth:       w.auth,
		Tags:       git.NoTags,
		Force:      true,
	})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, err
	}
	ref, err := w.repo.Reference(remote, true)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

// reset moves the branch and the worktree onto head, dropping the local
// commit that lost the race.
func (w *workspace) reset(head plumbing.Hash) error {
	if err := w.wt.Reset(&git.ResetOptions{Commit: head, Mode: git.HardReset}); err != nil {
		return err
	}
	w.base = head
	return nil
}
