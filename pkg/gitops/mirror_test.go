package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

func TestMirrorVerifyPush(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"README.md": "deployments\n", "clusters/c1/app.yaml": "a: 1\n"})
	seed := gittest.Head(t, url).Hash.String()
	c2 := gittest.Commit(t, url, "main", "c1 values", map[string]string{"clusters/c1/app.yaml": "a: 2\n", "clusters/c2/app.yaml": "b: 1\n"})
	c3 := gittest.Commit(t, url, "main", "readme", map[string]string{"README.md": "more\n"})
	side := gittest.Commit(t, url, "feature", "on a branch", map[string]string{"clusters/c1/app.yaml": "a: 3\n"})
	gittest.Tag(t, url, "v1.0.0", c2)
	m := NewMirror(t.TempDir())
	ctx := context.Background()
	tests := []struct {
		name                string
		ref, before, commit string
		want                []string
		wantErr             string
	}{
		{name: "the head, since before", ref: "refs/heads/main", before: seed, commit: c3, want: []string{"README.md", "clusters/c1/app.yaml", "clusters/c2/app.yaml"}},
		{name: "the head, before unknown: since its parent", ref: "refs/heads/main", commit: c3, want: []string{"README.md"}},
		{name: "before is git's null id (a new branch)", ref: "refs/heads/main", before: strings.Repeat("0", 40), commit: c2,
			want: []string{"clusters/c1/app.yaml", "clusters/c2/app.yaml"}},
		{name: "an older commit on the branch", ref: "refs/heads/main", before: seed, commit: c2, want: []string{"clusters/c1/app.yaml", "clusters/c2/app.yaml"}},
		{name: "the tag's commit", ref: "refs/tags/v1.0.0", commit: c2, want: []string{"clusters/c1/app.yaml", "clusters/c2/app.yaml"}},
		{name: "a commit of another branch", ref: "refs/heads/main", commit: side, wantErr: "is not on refs/heads/main"},
		{name: "a commit the tag does not name", ref: "refs/tags/v1.0.0", commit: c3, wantErr: "does not name commit"},
		{name: "a commit the repository does not have", ref: "refs/heads/main", commit: strings.Repeat("ab", 20), wantErr: "has no commit"},
		{name: "not a commit id", ref: "refs/heads/main", commit: "HEAD", wantErr: "has no commit"},
		{name: "a branch the repository does not have", ref: "refs/heads/gone", commit: c3, wantErr: "has no refs/heads/gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.VerifyPush(ctx, Repo{URL: url}, tt.ref, tt.before, tt.commit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrUnverified) || !fault.IsPermanent(err) {
					t.Fatalf("VerifyPush() error = %v, want a permanent ErrUnverified containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("VerifyPush() error = %v", err)
			}
			if got.Hash != tt.commit {
				t.Errorf("Hash = %s, want %s", got.Hash, tt.commit)
			}
			if diff := cmp.Diff(tt.want, got.Changed); diff != "" {
				t.Errorf("Changed (-want +got):\n%s", diff)
			}
		})
	}
}

// A push after the copy was made is fetched; a repository that cannot be
// fetched is an access error, permanent.
func TestMirrorFetchesAgainAndCheckout(t *testing.T) {
	url := gittest.NewRepo(t, map[string]string{"a/b.yaml": "x: 1\n"})
	m := NewMirror(t.TempDir())
	ctx := context.Background()
	first := gittest.Head(t, url).Hash.String()
	if _, err := m.VerifyPush(ctx, Repo{URL: url}, "refs/heads/main", "", first); err != nil {
		t.Fatal(err)
	}
	next := gittest.Commit(t, url, "main", "next", map[string]string{"a/b.yaml": "x: 2\n", "c.yaml": "y: 1\n"})
	if _, err := m.VerifyPush(ctx, Repo{URL: url}, "refs/heads/main", first, next); err != nil {
		t.Fatalf("VerifyPush(a newer commit) = %v", err)
	}
	for commit, want := range map[string]string{first: "x: 1\n", next: "x: 2\n"} {
		dir := filepath.Join(t.TempDir(), "tree")
		if err := m.Checkout(ctx, Repo{URL: url}, commit, dir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "a", "b.yaml"))
		if err != nil || string(got) != want {
			t.Errorf("checkout of %s: a/b.yaml = %q, %v; want %q", commit, got, err, want)
		}
	}
	// A fresh mirror checks out a commit it has never seen by fetching.
	dir := filepath.Join(t.TempDir(), "tree")
	if err := NewMirror(t.TempDir()).Checkout(ctx, Repo{URL: url}, next, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.yaml")); err != nil {
		t.Error(err)
	}
	_, err := m.VerifyPush(ctx, Repo{URL: "file://" + t.TempDir() + "/none.git"}, "refs/heads/main", "", next)
	if !errors.Is(err, ErrAccess) || !fault.IsPermanent(err) {
		t.Errorf("VerifyPush(no repository) = %v, want a permanent ErrAccess", err)
	}
}
