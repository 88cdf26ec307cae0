package gittest

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	git "github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
)

// NewRepo creates a bare repository in tb.TempDir() whose main branch holds
// files in one commit, and returns its file:// URL.
func NewRepo(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "deployments.git")
	if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}, Bare: true,
	}); err != nil {
		tb.Fatal(err)
	}
	work, err := git.InitWithOptions(memory.NewStorage(), memfs.New(), git.InitOptions{DefaultBranch: plumbing.Main})
	if err != nil {
		tb.Fatal(err)
	}
	wt, err := work.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	for p, content := range files {
		if err := util.WriteFile(wt.Filesystem, p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			tb.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "seed", Email: "seed@localhost", When: time.Unix(0, 0)}
	if _, err := wt.Commit("seed", &git.CommitOptions{Author: sig}); err != nil {
		tb.Fatal(err)
	}
	url := "file://" + dir
	if _, err := work.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
		tb.Fatal(err)
	}
	if err := work.Push(&git.PushOptions{RemoteName: "origin"}); err != nil {
		tb.Fatal(err)
	}
	return url
}

// Head returns the commit at the head of main in the repository at url.
func Head(tb testing.TB, url string) *object.Commit {
	tb.Helper()
	r, err := git.PlainOpen(strings.TrimPrefix(url, "file://"))
	if err != nil {
		tb.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		tb.Fatal(err)
	}
	c, err := r.CommitObject(ref.Hash())
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// File returns the content of path in commit c.
func File(tb testing.TB, c *object.Commit, path string) string {
	tb.Helper()
	f, err := c.File(path)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := f.Contents()
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Commit clones branch of the repository at url, writes files (an empty
// content deletes the file), commits them with message and pushes; it
// returns the new commit's id. A branch that does not exist yet is made
// from main.
func Commit(tb testing.TB, url, branch, message string, files map[string]string) string {
	tb.Helper()
	work, err := git.Clone(memory.NewStorage(), memfs.New(), &git.CloneOptions{URL: url, ReferenceName: plumbing.Main})
	if err != nil {
		tb.Fatal(err)
	}
	wt, err := work.Worktree()
	if err != nil {
		tb.Fatal(err)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if branch != "main" {
		opts := &git.CheckoutOptions{Branch: ref, Create: true}
		if remote, err := work.Reference(plumbing.NewRemoteReferenceName("origin", branch), true); err == nil {
			opts.Hash = remote.Hash()
		}
		if err := wt.Checkout(opts); err != nil {
			tb.Fatal(err)
		}
	}
	for p, content := range files {
		if content == "" {
			if _, err := wt.Remove(p); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := util.WriteFile(wt.Filesystem, p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			tb.Fatal(err)
		}
	}
	sig := &object.Signature{Name: "dev", Email: "dev@localhost", When: time.Now()}
	h, err := wt.Commit(message, &git.CommitOptions{Author: sig, AllowEmptyCommits: true})
	if err != nil {
		tb.Fatal(err)
	}
	spec := gitconfig.RefSpec(ref.String() + ":" + ref.String())
	if err := work.Push(&git.PushOptions{RemoteName: "origin", RefSpecs: []gitconfig.RefSpec{spec}}); err != nil {
		tb.Fatal(err)
	}
	return h.String()
}

// Tag makes a lightweight tag name at commit in the repository at url.
func Tag(tb testing.TB, url, name, commit string) {
	tb.Helper()
	r, err := git.PlainOpen(strings.TrimPrefix(url, "file://"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := r.CreateTag(name, plumbing.NewHash(commit), nil); err != nil {
		tb.Fatal(err)
	}
}
