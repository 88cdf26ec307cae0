package gitops_test

import (
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/gitops"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// Head reads a branch's head from a real repository, as git ls-remote.
func TestHead(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"a.yaml": "a: 1\n"})
	seed := gittest.Head(t, url).Hash.String()
	got, err := gitops.Head(t.Context(), gitops.Repo{URL: url, Branch: "main"})
	if err != nil || got != seed {
		t.Errorf("Head of main = %q, %v; want the seed commit %s", got, err, seed)
	}
	next := gittest.Commit(t, url, "main", "next", map[string]string{"a.yaml": "a: 2\n"})
	release := gittest.Commit(t, url, "release", "release", map[string]string{"b.yaml": "b: 1\n"})
	for branch, want := range map[string]string{"main": next, "release": release} {
		if got, err := gitops.Head(t.Context(), gitops.Repo{URL: url, Branch: branch}); err != nil || got != want {
			t.Errorf("Head of %s = %q, %v; want %s", branch, got, err, want)
		}
	}
	if _, err := gitops.Head(t.Context(), gitops.Repo{URL: url, Branch: "nope"}); !fault.IsPermanent(err) {
		t.Errorf("Head of a missing branch: %v, want a permanent error", err)
	}
	if _, err := gitops.Head(t.Context(), gitops.Repo{URL: "file:///nonexistent/repo.git", Branch: "main"}); err == nil {
		t.Error("Head of a missing repository succeeded")
	}
}
