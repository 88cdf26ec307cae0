package gitops

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-billy/v5/util"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// The tests push to real bare repositories in t.TempDir() through go-git's
// file transport, which runs git-upload-pack and git-receive-pack.

// seedFiles is the deployments repository every test starts from: the
// testdata before files, and one values file per app for the concurrency
// tests.
func seedFiles(t *testing.T) map[string]string {
	t.Helper()
	files := map[string]string{
		"apps/api/kustomization.yaml": string(readTestdata(t, "kustomize-update", "before")),
		"charts/api/values.yaml":      string(readTestdata(t, "helm-default", "before")),
		"charts/platform/values.yaml": string(readTestdata(t, "helm-subchart", "before")),
		"manifests/api.yaml":          string(readTestdata(t, "manifest-multidoc", "before")),
		"README.md":                   "deployments\n",
	}
	for i := range 8 {
		files[fmt.Sprintf("apps/app%d/values.yaml", i)] = fmt.Sprintf(
			"# app%d\nimage:\n  repository: registry.example.com/team/app%d\n  tag: \"1.0.0\"\n", i, i)
	}
	return files
}

var fixedClock = WithClock(func() time.Time { return time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC) })

// checkout clones url's main branch afresh, fully.
func checkout(t *testing.T, url string) *git.Repository {
	t.Helper()
	repo, err := git.Clone(memory.NewStorage(), memfs.New(), &git.CloneOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func readFile(t *testing.T, repo *git.Repository, path string) string {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	b, err := util.ReadFile(wt.Filesystem, path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// history is the commit messages of the main branch, newest first.
func history(t *testing.T, repo *git.Repository) []*object.Commit {
	t.Helper()
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	iter, err := repo.Log(&git.LogOptions{From: head.Hash()})
	if err != nil {
		t.Fatal(err)
	}
	var commits []*object.Commit
	if err := iter.ForEach(func(c *object.Commit) error { commits = append(commits, c); return nil }); err != nil {
		t.Fatal(err)
	}
	return commits
}

func headHash(t *testing.T, repo *git.Repository) string {
	t.Helper()
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	return head.Hash().String()
}

// TestBumpEachEdit bumps each kind of file end to end and checks, in a fresh
// clone, the file's bytes (the same as the edit's testdata), that no other
// file changed, and the commit.
func TestBumpEachEdit(t *testing.T) {
	tests := []struct {
		name     string
		path     string
		edit     Edit
		testdata string
	}{
		{"kustomize", "apps/api/kustomization.yaml", Kustomize{}, "kustomize-update"},
		{"helm values", "charts/api/values.yaml", HelmValues{}, "helm-default"},
		{"helm sub-chart", "charts/platform/values.yaml", HelmValues{Prefix: "api."}, "helm-subchart"},
		{"manifest", "manifests/api.yaml", Manifest{}, "manifest-multidoc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seed := seedFiles(t)
			url := gittest.NewRepo(t, seed)
			change := Change{App: "api", Rollout: "r-abc", Image: api, Files: []File{{tt.path, tt.edit}}}

			res, err := Bump(t.Context(), Repo{URL: url, Branch: "main"}, change, fixedClock)
			if err != nil {
				t.Fatalf("Bump: %v", err)
			}
			repo := checkout(t, url)
			want := Result{Commit: headHash(t, repo), Changed: true, Files: []string{tt.path}, Attempts: 1}
			if diff := cmp.Diff(want, res); diff != "" {
				t.Errorf("Bump result (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(string(readTestdata(t, tt.testdata, "after")), readFile(t, repo, tt.path)); diff != "" {
				t.Errorf("%s after the bump (-want +got)\n%s", tt.path, diff)
			}
			for p, content := range seed {
				if p != tt.path && readFile(t, repo, p) != content {
					t.Errorf("%s changed, want it untouched", p)
				}
			}

			commits := history(t, repo)
			if len(commits) != 2 {
				t.Fatalf("history has %d commits, want seed + bump", len(commits))
			}
			c := commits[0]
			wantMsg := "flotilla: api 1.4.2 (rollout r-abc)\n\nImage: registry.example.com/team/api:1.4.2@" + newDigest + "\nRollout: r-abc\n"
			if c.Message != wantMsg {
				t.Errorf("commit message = %q, want %q", c.Message, wantMsg)
			}
			if c.Author.Name != "flotilla" || c.Author.Email != "flotilla@localhost" || !c.Author.When.Equal(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)) {
				t.Errorf("commit author = %v, want flotilla <flotilla@localhost> at the injected time", c.Author)
			}
		})
	}
}

// TestBumpSeveralFiles bumps a kustomization and a manifest in one commit,
// with a configured author and message, on the remote's default branch.
func TestBumpSeveralFiles(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	change := Change{Image: api, Message: "bump api\n", Files: []File{
		{"apps/api/kustomization.yaml", Kustomize{}},
		{"./charts/api/values.yaml", HelmValues{}},
	}}
	repo := Repo{URL: url, Author: Author{Name: "Deploy Bot", Email: "bot@example.com"}}
	res, err := Bump(t.Context(), repo, change)
	if err != nil {
		t.Fatalf("Bump: %v", err)
	}
	if diff := cmp.Diff([]string{"apps/api/kustomization.yaml", "charts/api/values.yaml"}, res.Files); diff != "" {
		t.Errorf("Files (-want +got)\n%s", diff)
	}
	c := history(t, checkout(t, url))[0]
	if c.Message != "bump api\n" || c.Author.Name != "Deploy Bot" || c.Author.Email != "bot@example.com" {
		t.Errorf("commit = %q by %s <%s>, want the configured message and author", c.Message, c.Author.Name, c.Author.Email)
	}
}

// TestBumpIdempotent bumps twice: the second finds nothing to change,
// commits nothing and reports the head it checked.
func TestBumpIdempotent(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	change := Change{App: "api", Rollout: "r-1", Image: api, Files: []File{
		{"apps/api/kustomization.yaml", Kustomize{}},
		{"manifests/api.yaml", Manifest{}},
	}}
	first, err := Bump(t.Context(), Repo{URL: url}, change)
	if err != nil || !first.Changed {
		t.Fatalf("first Bump = %+v, %v; want a commit", first, err)
	}
	second, err := Bump(t.Context(), Repo{URL: url}, change)
	if err != nil {
		t.Fatalf("second Bump: %v", err)
	}
	if diff := cmp.Diff(Result{Commit: first.Commit, Attempts: 1}, second); diff != "" {
		t.Errorf("second Bump (-want +got)\n%s", diff)
	}
	if n := len(history(t, checkout(t, url))); n != 2 {
		t.Errorf("history has %d commits, want seed + one bump", n)
	}
}

// TestBumpConcurrentApps runs 8 bumps of different apps against one
// repository at once: every one lands, none is lost.
func TestBumpConcurrentApps(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	const n = 8
	results := make([]Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			change := Change{
				App:     fmt.Sprintf("app%d", i),
				Rollout: fmt.Sprintf("r-%d", i),
				Image:   Image{Repository: fmt.Sprintf("registry.example.com/team/app%d", i), Tag: "2.0.0"},
				Files:   []File{{fmt.Sprintf("apps/app%d/values.yaml", i), HelmValues{}}},
			}
			results[i], errs[i] = Bump(t.Context(), Repo{URL: url, Branch: "main"}, change, WithBackoff(5*time.Millisecond, 200*time.Millisecond))
		})
	}
	wg.Wait()

	repo := checkout(t, url)
	commits := history(t, repo)
	if len(commits) != n+1 {
		t.Errorf("history has %d commits, want seed + %d bumps", len(commits), n)
	}
	attempts := 0
	for i := range n {
		if errs[i] != nil || !results[i].Changed {
			t.Errorf("bump %d = %+v, %v; want a commit", i, results[i], errs[i])
			continue
		}
		attempts += results[i].Attempts
		got := readFile(t, repo, fmt.Sprintf("apps/app%d/values.yaml", i))
		if !strings.Contains(got, `tag: "2.0.0"`) {
			t.Errorf("app%d values = %q, want tag 2.0.0", i, got)
		}
		found := false
		for _, c := range commits {
			found = found || (c.Hash.String() == results[i].Commit && strings.Contains(c.Message, fmt.Sprintf("(rollout r-%d)", i)))
		}
		if !found {
			t.Errorf("bump %d's commit %s is not in the history", i, results[i].Commit)
		}
	}
	t.Logf("%d bumps took %d attempts in all", n, attempts)
}

// TestBumpConcurrentSameFile runs two bumps of the same kustomization at
// once, for different images: both entries end up set.
func TestBumpConcurrentSameFile(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	images := []Image{api, {Repository: "registry.example.com/team/worker", Tag: "0.9.2"}}
	errs := make([]error, len(images))
	var wg sync.WaitGroup
	for i, img := range images {
		wg.Go(func() {
			change := Change{Rollout: fmt.Sprintf("r-%d", i), Image: img, Files: []File{{"apps/api/kustomization.yaml", Kustomize{}}}}
			_, errs[i] = Bump(t.Context(), Repo{URL: url}, change, WithBackoff(5*time.Millisecond, 100*time.Millisecond))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("bump %d: %v", i, err)
		}
	}
	repo := checkout(t, url)
	want := strings.Replace(string(readTestdata(t, "kustomize-update", "after")), `newTag: "0.9.1"`, `newTag: "0.9.2"`, 1)
	if diff := cmp.Diff(want, readFile(t, repo, "apps/api/kustomization.yaml")); diff != "" {
		t.Errorf("kustomization (-want +got)\n%s", diff)
	}
	if n := len(history(t, repo)); n != 3 {
		t.Errorf("history has %d commits, want seed + 2 bumps", n)
	}
}

// TestBumpRebasesOntoMovedBranch makes the branch move between the commit
// and the push: the bump re-applies its edit on the new head, and both
// commits are in the history.
func TestBumpRebasesOntoMovedBranch(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	other := Change{App: "app1", Image: Image{Repository: "registry.example.com/team/app1", Tag: "3.0.0"},
		Files: []File{{"apps/app1/values.yaml", HelmValues{}}}}
	moveOnce := func(o *options) {
		o.beforePush = func(ctx context.Context, attempt int) {
			if attempt == 1 {
				if _, err := Bump(ctx, Repo{URL: url}, other); err != nil {
					t.Errorf("concurrent Bump: %v", err)
				}
			}
		}
	}
	change := Change{App: "api", Image: api, Files: []File{{"charts/api/values.yaml", HelmValues{}}}}
	res, err := Bump(t.Context(), Repo{URL: url}, change, WithBackoff(time.Millisecond, time.Millisecond), moveOnce)
	if err != nil {
		t.Fatalf("Bump: %v", err)
	}
	if res.Attempts != 2 || !res.Changed {
		t.Errorf("Bump = %+v, want a commit on the second attempt", res)
	}
	repo := checkout(t, url)
	var subjects []string
	for _, c := range history(t, repo) {
		subjects = append(subjects, strings.SplitN(c.Message, "\n", 2)[0])
	}
	if diff := cmp.Diff([]string{"flotilla: api 1.4.2", "flotilla: app1 3.0.0", "seed"}, subjects); diff != "" {
		t.Errorf("history (-want +got)\n%s", diff)
	}
	if got := readFile(t, repo, "apps/app1/values.yaml"); !strings.Contains(got, `tag: "3.0.0"`) {
		t.Errorf("app1 values = %q, want the concurrent bump kept", got)
	}
}

// TestBumpBranchKeepsMoving gives up after the configured attempts with
// ErrConflict, which is worth retrying later.
func TestBumpBranchKeepsMoving(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	always := func(o *options) {
		o.beforePush = func(ctx context.Context, attempt int) {
			other := Change{Image: Image{Repository: "registry.example.com/team/app2", Tag: fmt.Sprintf("9.0.%d", attempt)},
				Files: []File{{"apps/app2/values.yaml", HelmValues{}}}}
			if _, err := Bump(ctx, Repo{URL: url}, other); err != nil {
				t.Errorf("concurrent Bump: %v", err)
			}
		}
	}
	change := Change{Image: api, Files: []File{{"charts/api/values.yaml", HelmValues{}}}}
	res, err := Bump(t.Context(), Repo{URL: url}, change, WithAttempts(3), WithBackoff(time.Millisecond, time.Millisecond), always)
	if !errors.Is(err, ErrConflict) || IsPermanent(err) {
		t.Fatalf("Bump error = %v, want a retryable ErrConflict", err)
	}
	if res.Attempts != 3 || res.Changed {
		t.Errorf("Bump = %+v, want 3 attempts and nothing pushed", res)
	}
}

func TestBumpErrors(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	missing := "file://" + filepath.Join(t.TempDir(), "nope.git")
	kust := []File{{"apps/api/kustomization.yaml", Kustomize{}}}
	tests := []struct {
		name      string
		repo      Repo
		change    Change
		wantErr   error
		permanent bool
		wantMsg   string
	}{
		{"missing file", Repo{URL: url}, Change{Image: api, Files: []File{{"apps/nope/values.yaml", HelmValues{}}}},
			ErrFileNotFound, true, "editing apps/nope/values.yaml: file not found on branch main"},
		{"missing yaml path", Repo{URL: url}, Change{Image: api, Files: []File{{"charts/api/values.yaml", HelmValues{Prefix: "web."}}}},
			ErrPathNotFound, true, `editing charts/api/values.yaml: yaml path "web.image.tag": path not found`},
		{"no matching container", Repo{URL: url}, Change{Image: api, Files: []File{{"README.md", Manifest{}}}},
			ErrNoMatch, true, "editing README.md"},
		{"missing branch", Repo{URL: url, Branch: "nope"}, Change{Image: api, Files: kust},
			ErrAccess, true, "cloning " + url},
		{"missing repository", Repo{URL: missing}, Change{Image: api, Files: kust},
			ErrAccess, true, "cloning " + missing},
		{"no files", Repo{URL: url}, Change{Image: api},
			ErrInvalid, true, "no files"},
		{"path outside the repository", Repo{URL: url}, Change{Image: api, Files: []File{{"apps/../../x.yaml", Kustomize{}}}},
			ErrInvalid, true, `"apps/../../x.yaml"`},
		{"absolute path", Repo{URL: url}, Change{Image: api, Files: []File{{"/etc/x.yaml", Kustomize{}}}},
			ErrInvalid, true, `"/etc/x.yaml"`},
		{"no image", Repo{URL: url}, Change{Files: kust},
			ErrInvalid, true, "no repository"},
		{"two credentials", Repo{URL: url, Auth: Auth{Token: "s3cr3t-token", SSHKeyFile: "/k"}}, Change{Image: api, Files: kust},
			ErrInvalid, true, "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Bump(t.Context(), tt.repo, tt.change)
			t.Log(err)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Bump error = %v, want %v", err, tt.wantErr)
			}
			if IsPermanent(err) != tt.permanent {
				t.Errorf("IsPermanent = %v, want %v", IsPermanent(err), tt.permanent)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("Bump error = %q, want it to contain %q", err, tt.wantMsg)
			}
			if res.Changed {
				t.Errorf("Bump = %+v, want nothing changed", res)
			}
		})
	}
	if n := len(history(t, checkout(t, url))); n != 1 {
		t.Errorf("history has %d commits, want the seed only", n)
	}
}

// TestBumpContextCancelled stops before cloning when ctx is already done,
// and stops in the backoff between attempts when ctx ends there.
func TestBumpContextCancelled(t *testing.T) {
	url := gittest.NewRepo(t, seedFiles(t))
	change := Change{Image: api, Files: []File{{"charts/api/values.yaml", HelmValues{}}}}

	t.Run("before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := Bump(ctx, Repo{URL: url}, change)
		if !errors.Is(err, context.Canceled) || IsPermanent(err) {
			t.Errorf("Bump error = %v, want a retryable context.Canceled", err)
		}
	})

	t.Run("in backoff", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		moveAndCancel := func(o *options) {
			o.beforePush = func(ctx context.Context, _ int) {
				other := Change{Image: Image{Repository: "registry.example.com/team/app3", Tag: "4.0.0"},
					Files: []File{{"apps/app3/values.yaml", HelmValues{}}}}
				if _, err := Bump(ctx, Repo{URL: url}, other); err != nil {
					t.Errorf("concurrent Bump: %v", err)
				}
				time.AfterFunc(20*time.Millisecond, cancel)
			}
		}
		start := time.Now()
		res, err := Bump(ctx, Repo{URL: url}, change, WithBackoff(time.Hour, time.Hour), moveAndCancel)
		if !errors.Is(err, context.Canceled) || IsPermanent(err) {
			t.Errorf("Bump error = %v, want a retryable context.Canceled", err)
		}
		if time.Since(start) > time.Minute || res.Changed || res.Attempts != 1 {
			t.Errorf("Bump = %+v after %v, want it stopped in the first backoff", res, time.Since(start))
		}
	})

	if got := readFile(t, checkout(t, url), "charts/api/values.yaml"); got != string(readTestdata(t, "helm-default", "before")) {
		t.Errorf("values.yaml = %q, want it untouched", got)
	}
}

// TestBumpScrubsSecrets checks that a credential in the URL or the auth
// never reaches an error message.
func TestBumpScrubsSecrets(t *testing.T) {
	for _, repo := range []Repo{
		{URL: "http://user:pa55word-url@127.0.0.1:1/deploy.git", Auth: Auth{Token: "t0ken-secret"}},
		{URL: "http://ghp_t0kenAsUser@127.0.0.1:1/deploy.git"},
	} {
		_, err := Bump(t.Context(), repo, Change{Image: api, Files: []File{{"a.yaml", Kustomize{}}}})
		if err == nil {
			t.Fatal("Bump succeeded against a closed port")
		}
		t.Log(err)
		for _, secret := range []string{"pa55word-url", "t0ken-secret", "t0kenAsUser"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows a secret", err)
			}
		}
		if IsPermanent(err) {
			t.Errorf("connection refused is permanent: %v", err)
		}
	}
	repo := Repo{Auth: Auth{Token: "t0ken-secret"}}
	if got := fmt.Sprint(repo.Auth); got != "token" {
		t.Errorf("Auth prints as %q, want just its kind", got)
	}
}
