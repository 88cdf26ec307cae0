package gitops

import (
	"testing"

	"github.com/go-git/go-billy/v5/memfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// branchHead reads a branch's head on the remote, "" when there is none.
func branchHead(t *testing.T, url, branch string) string {
	t.Helper()
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{url}})
	refs, err := rem.List(&git.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.Name() == plumbing.NewBranchReferenceName(branch) {
			return r.Hash().String()
		}
	}
	return ""
}

// checkoutBranch clones one branch of url.
func checkoutBranch(t *testing.T, url, branch string) *git.Repository {
	t.Helper()
	repo, err := git.Clone(memory.NewStorage(), memfs.New(), &git.CloneOptions{URL: url, ReferenceName: plumbing.NewBranchReferenceName(branch), SingleBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestPropose pushes a wave's bumps to a branch of their own: the base is
// untouched, the branch is one commit on it holding every change, a second
// call pushes nothing, and a base that already holds them is Unchanged.
func TestPropose(t *testing.T) {
	seed := seedFiles(t)
	url := gittest.NewRepo(t, seed)
	base := headHash(t, checkout(t, url))
	p := Proposal{Branch: "flotilla/api-r1/1", Changes: []Change{
		{App: "api", Rollout: "api-r1", Image: api, Files: []File{{"apps/api/kustomization.yaml", Kustomize{}}, {"charts/api/values.yaml", HelmValues{}}}},
	}}
	res, err := Propose(t.Context(), Repo{URL: url, Branch: "main"}, p, fixedClock)
	if err != nil {
		t.Fatalf("Propose: %v", err)
	}
	head := branchHead(t, url, p.Branch)
	want := Proposed{Base: base, BaseBranch: "main", Commit: head, Pushed: true, Files: []string{"apps/api/kustomization.yaml", "charts/api/values.yaml"}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("Propose (-want +got)\n%s", diff)
	}
	if got := headHash(t, checkout(t, url)); got != base {
		t.Errorf("main moved to %s: the base must stay at %s", got, base)
	}
	repo := checkoutBranch(t, url, p.Branch)
	if diff := cmp.Diff(string(readTestdata(t, "kustomize-update", "after")), readFile(t, repo, "apps/api/kustomization.yaml")); diff != "" {
		t.Errorf("kustomization on the branch (-want +got)\n%s", diff)
	}
	commits := history(t, repo)
	if len(commits) != 2 || commits[0].ParentHashes[0].String() != base {
		t.Fatalf("the branch has %d commits; want one on the base", len(commits))
	}
	if want := "flotilla: api 1.4.2 (rollout api-r1)"; commits[0].Message[:len(want)] != want {
		t.Errorf("message = %q, want it to start with %q", commits[0].Message, want)
	}

	again, err := Propose(t.Context(), Repo{URL: url, Branch: "main"}, p)
	if err != nil {
		t.Fatalf("second Propose: %v", err)
	}
	want.Pushed = false
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("second Propose (-want +got)\n%s", diff)
	}

	// The base moves (another commit lands): the branch is cut again.
	if _, err := Bump(t.Context(), Repo{URL: url}, Change{Image: api, Files: []File{{"manifests/api.yaml", Manifest{}}}}); err != nil {
		t.Fatal(err)
	}
	moved, err := Propose(t.Context(), Repo{URL: url, Branch: "main"}, p)
	if err != nil {
		t.Fatalf("Propose after the base moved: %v", err)
	}
	if !moved.Pushed || moved.Base == base || moved.Commit == head {
		t.Errorf("Propose after the base moved = %+v: want the branch cut again from the new base", moved)
	}

	// Merged by hand: the base holds it, nothing to propose.
	if _, err := Bump(t.Context(), Repo{URL: url}, p.Changes[0]); err != nil {
		t.Fatal(err)
	}
	held, at, err := Holds(t.Context(), Repo{URL: url}, p.Changes)
	if err != nil || !held || at != headHash(t, checkout(t, url)) {
		t.Errorf("Holds = %v at %s, %v; want true at main's head", held, at, err)
	}
	unchanged, err := Propose(t.Context(), Repo{URL: url}, Proposal{Branch: "flotilla/api-r2/1", Changes: p.Changes})
	if err != nil {
		t.Fatal(err)
	}
	if !unchanged.Unchanged || unchanged.Pushed || branchHead(t, url, "flotilla/api-r2/1") != "" {
		t.Errorf("Propose of what the base holds = %+v; want Unchanged and no branch", unchanged)
	}
}

// TestProposeRevert proposes each cluster's own previous image in one
// commit; Holds is false until it is merged.
func TestProposeRevert(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	var changes []Change
	for i, tag := range []string{"0.9.0", "0.9.1"} {
		img := Image{Repository: "registry.example.com/team/app" + string(rune('0'+i)), Tag: tag}
		changes = append(changes, Change{Image: img, Files: []File{{"apps/app" + string(rune('0'+i)) + "/values.yaml", HelmValues{}}}})
	}
	held, _, err := Holds(t.Context(), Repo{URL: url}, changes)
	if err != nil || held {
		t.Fatalf("Holds before = %v, %v; want false", held, err)
	}
	res, err := Propose(t.Context(), Repo{URL: url}, Proposal{Branch: "flotilla/r/1-revert", Changes: changes, Message: "revert\n"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"apps/app0/values.yaml", "apps/app1/values.yaml"}, res.Files); diff != "" {
		t.Errorf("Files (-want +got)\n%s", diff)
	}
	repo := checkoutBranch(t, url, "flotilla/r/1-revert")
	if got := readFile(t, repo, "apps/app1/values.yaml"); got != "# app1\nimage:\n  repository: registry.example.com/team/app1\n  tag: \"0.9.1\"\n" {
		t.Errorf("app1 on the branch = %q", got)
	}
}

func TestProposeErrors(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	ok := []Change{{Image: api, Files: []File{{"apps/api/kustomization.yaml", Kustomize{}}}}}
	tests := []struct {
		name string
		p    Proposal
	}{
		{"no branch", Proposal{Changes: ok}},
		{"bad branch", Proposal{Branch: "a..b", Changes: ok}},
		{"the base", Proposal{Branch: "main", Changes: ok}},
		{"no changes", Proposal{Branch: "x"}},
		{"missing file", Proposal{Branch: "x", Changes: []Change{{Image: api, Files: []File{{"nope.yaml", Kustomize{}}}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Propose(t.Context(), Repo{URL: url}, tt.p)
			if err == nil || !IsPermanent(err) {
				t.Errorf("Propose = %v, want a permanent error", err)
			}
		})
	}
}
