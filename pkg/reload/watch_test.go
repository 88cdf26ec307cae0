package reload

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/pkg/config"
)

const doc = `
receivers:
  - {name: canaries, type: flagger, secret: {env: FLOTILLA_TEST_TOKEN}}
fleet:
  clusters: [{name: c1, kubeconfig: c1.kubeconfig}]
  waves: [{clusters: [c1]}]
applications:
`

const app = `  - {name: %s, image: registry.example.com/%s, workload: {name: %s}, service: {port: 80}}
`

func appsDoc(names ...string) string {
	out := doc
	for _, n := range names {
		out += fmt.Sprintf(app, n, n, n)
	}
	return out
}

// TestWatchFile: the file reloads when its content changes, written in
// place, replaced by a rename (an editor) or by a ConfigMap's symlink
// swap (..data), and on SIGHUP; an invalid content is refused and the
// running configuration stays.
func TestWatchFile(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "token")
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "c1.kubeconfig"), "apiVersion: v1\nkind: Config\n")
	// As the kubelet mounts a ConfigMap: config.yaml -> ..data/config.yaml,
	// ..data -> a timestamped directory, swapped by a rename.
	mount := func(name, content string) {
		t.Helper()
		ts := filepath.Join(dir, name)
		if err := os.Mkdir(ts, 0o755); err != nil {
			t.Fatal(err)
		}
		write(filepath.Join(ts, "config.yaml"), content)
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mount("..v1", appsDoc("a"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.Symlink(filepath.Join("..data", "config.yaml"), path); err != nil {
		t.Fatal(err)
	}
	// Relative paths (c1.kubeconfig) resolve against the directory of
	// path, the symlink's.
	first, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	live := config.NewLive(first)
	r, err := New(live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.WatchFile(ctx, path, 20*time.Millisecond, hup) }()
	// WatchFile hashes the file first: a change before that is its start.
	time.Sleep(200 * time.Millisecond)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	apps := func() []string {
		var out []string
		for _, a := range live.Current().Applications {
			out = append(out, a.Name)
		}
		return out
	}
	waitApps := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if got := apps(); len(got) == len(want) && (len(want) == 0 || got[len(got)-1] == want[len(want)-1]) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("applications in force %v, want %v", apps(), want)
	}
	count := func(o Outcome) float64 { return testutil.ToFloat64(r.reloads.WithLabelValues(string(o))) }

	// A ConfigMap's update: a new timestamped directory, ..data swapped.
	mount("..v2", appsDoc("a", "b"))
	waitApps("a", "b")

	// An invalid content: refused, the running configuration stays.
	target := filepath.Join(dir, "..v2", "config.yaml")
	write(target, appsDoc("a", "b")+"  - {name: c, image: registry.example.com/c, track: Sometimes, workload: {name: c}, service: {port: 80}}\n")
	deadline := time.Now().Add(30 * time.Second)
	for count(Invalid) < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if count(Invalid) != 1 {
		t.Fatalf("invalid reloads %v, want 1", count(Invalid))
	}
	waitApps("a", "b")

	// An editor's save: a new file renamed over the old one.
	write(target+".swp", appsDoc("a", "b", "c"))
	if err := os.Rename(target+".swp", target); err != nil {
		t.Fatal(err)
	}
	waitApps("a", "b", "c")

	// SIGHUP reloads even an unchanged file.
	before := count(Applied)
	hup <- syscall.SIGHUP
	deadline = time.Now().Add(30 * time.Second)
	for count(Applied) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if count(Applied) != before+1 {
		t.Errorf("applied reloads after SIGHUP %v, want %v", count(Applied), before+1)
	}
}
