package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

// gitServer serves one bare deployments repository over git's smart HTTP
// protocol with the real git-http-backend (as the test kit serves git),
// unauthenticated, pushes allowed. After every push it POSTs to each
// webhook URL, as a git host's push webhook does (GitHub, GitLab, Gitea
// send theirs once the push is stored): Flux's docs have a Receiver take
// the git host's push events so that a GitRepository fetches at once
// instead of at its interval.
type gitServer struct {
	dir  string // the bare repository
	url  string // http://127.0.0.1:port/deploy.git
	srv  *http.Server
	mu   sync.Mutex
	hook []string
	log  func(msg string, args ...any)
}

// newGitServer creates the bare repository dir/deploy.git with files (path
// -> content) committed on main, and serves it.
func newGitServer(ctx context.Context, dir string, files map[string]string, log func(string, ...any)) (*gitServer, error) {
	out, err := exec.CommandContext(ctx, "git", "--exec-path").Output()
	if err != nil {
		return nil, fmt.Errorf("git is not installed (make deps): %w", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git's git-http-backend is missing (make deps installs git): %w", err)
	}
	bare := filepath.Join(dir, "deploy.git")
	work := filepath.Join(dir, "seed")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	for p, content := range files {
		f := filepath.Join(work, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	git := func(dir string, args ...string) error {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=peerbench", "GIT_AUTHOR_EMAIL=peerbench@localhost",
			"GIT_COMMITTER_NAME=peerbench", "GIT_COMMITTER_EMAIL=peerbench@localhost", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{dir, []string{"init", "-q", "--bare", "-b", "main", bare}},
		{work, []string{"init", "-q", "-b", "main"}},
		{work, []string{"add", "-A"}},
		{work, []string{"commit", "-q", "-m", "the deployments of every cluster"}},
		{work, []string{"push", "-q", bare, "main"}},
	} {
		if err := git(step.dir, step.args...); err != nil {
			return nil, err
		}
	}
	l, err := proc.Listen(ctx)
	if err != nil {
		return nil, err
	}
	g := &gitServer{dir: bare, url: "http://" + l.Addr().String() + "/deploy.git", log: log}
	backendHandler := &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + dir,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		},
	}
	g.srv = &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			backendHandler.ServeHTTP(rec, r)
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") && rec.status == http.StatusOK {
				g.pushed()
			}
		}),
	}
	go func() { _ = g.srv.Serve(l) }()
	return g, nil
}

// statusRecorder remembers the status git-http-backend answered.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// onPush adds a push webhook.
func (g *gitServer) onPush(url string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hook = append(g.hook, url)
}

// pushed sends every push webhook, each on its own, without waiting (a git
// host queues its deliveries).
func (g *gitServer) pushed() {
	g.mu.Lock()
	hooks := append([]string(nil), g.hook...)
	g.mu.Unlock()
	for _, u := range hooks {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			body := `{"ref":"refs/heads/main"}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
			if err != nil {
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				g.log("git push webhook failed", "url", u, "error", err)
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode/100 != 2 {
				g.log("git push webhook refused", "url", u, "status", resp.Status)
			}
		}()
	}
}

func (g *gitServer) stop() {
	if g != nil && g.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = g.srv.Shutdown(ctx)
	}
}
