package app

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// flotilla writes only under --data-dir. The chart mounts the config's
// directory from a ConfigMap, read-only: the git mirror used to go beside
// the config (server.dataDir resolved against it, --data-dir ignored), and
// a git application's first push failed in the pod.
func TestWritesOnlyUnderDataDir(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"clusters/c1/app.yaml": "a: 1\n"})
	commit := gittest.Head(t, repo).Hash.String()

	confDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(confDir, "c1.kubeconfig"), []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLOTILLA_SERVER_TEST_SECRET", "q9X/3vT+k2==")
	cfg, err := config.Parse([]byte(`
server:
  listen: 127.0.0.1:0
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_SERVER_TEST_SECRET}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
  - name: deployments
    namespace: demo
    workload: {name: podinfo}
    service: {port: 9898}
    source: {git: {url: "`+repo+`", paths: ["clusters/{cluster}"]}}
`), confDir)
	if err != nil {
		t.Fatal(err)
	}
	// As in the pod. Tests run as root, whom the mode does not stop: the
	// listing after the run is what catches a write.
	if err := os.Chmod(confDir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(confDir, 0o755) })

	dataDir := t.TempDir()
	s := runServer(t, cfg, Options{DataDir: dataDir, NoPrune: true})
	push, err := events.New("push-1", "/test", events.TypeGitPushed, events.GitPushed{
		RepoURL: repo, Ref: "refs/heads/main", Branch: "main", After: commit,
		Sender: "test", Receiver: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.store.Append(t.Context(), push); err != nil {
		t.Fatal(err)
	}
	// verify reads the push against the mirror, then says what it found.
	if typ := waitForType(t, s, events.TypeGitVerified, events.TypeGitRejected); typ != events.TypeGitVerified {
		t.Errorf("the push: %s, want %s", typ, events.TypeGitVerified)
	}

	if got, want := list(t, confDir), []string{"c1.kubeconfig"}; !cmp.Equal(got, want) {
		t.Errorf("the config's directory after the run (-want +got):\n%s", cmp.Diff(want, got))
	}
	if mirror := list(t, filepath.Join(dataDir, "git")); len(mirror) == 0 {
		t.Errorf("no git mirror under --data-dir %s", dataDir)
	}
}

// waitForType waits up to 20 s for the journal to hold an event of one of
// types and returns that event's type.
func waitForType(t *testing.T, s *Server, types ...string) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	var after uint64
	for {
		changed := s.store.Changed() // before Read: an append after it wakes us
		recs, err := s.store.Read(t.Context(), after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			after = r.Seq
			if slices.Contains(types, r.Event.Type()) {
				return r.Event.Type()
			}
		}
		if len(recs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no event of %v in the journal after 20 s", types)
		}
	}
}

// list names the entries of dir, recursively, relative to it.
func list(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		names = append(names, rel)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return names
}
