package pipelines

// Test helpers, exported to the external tests of this directory too.

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

// NewTestRepo creates a deployments repository in a temporary directory whose
// main branch holds files, and returns its file:// URL.
func NewTestRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "deployments.git")
	if _, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.Main}, Bare: true,
	}); err != nil {
		t.Fatal(err)
	}
	work, err := git.InitWithOptions(memory.NewStorage(), memfs.New(), git.InitOptions{DefaultBranch: plumbing.Main})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := work.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		if err := util.WriteFile(wt.Filesystem, p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wt.Commit("seed", &git.CommitOptions{Author: &object.Signature{Name: "seed", Email: "seed@localhost", When: time.Unix(0, 0)}}); err != nil {
		t.Fatal(err)
	}
	url := "file://" + dir
	if _, err := work.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
		t.Fatal(err)
	}
	if err := work.Push(&git.PushOptions{RemoteName: "origin"}); err != nil {
		t.Fatal(err)
	}
	return url
}

// HeadCommit is the commit at the head of main in the repository at url.
func HeadCommit(t *testing.T, url string) *object.Commit {
	t.Helper()
	r, err := git.PlainOpen(strings.TrimPrefix(url, "file://"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
