package giteatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Version is the Gitea build.sh builds; keep them in step.
const Version = "1.27.3"

// Binary is where build.sh puts the Gitea binary.
func Binary() string { return filepath.Join(localfleet.BinDir(), "gitea-"+Version) }

// Admin is the user Start creates, who owns the test repositories;
// Reviewer a second user, for review requests.
const (
	Admin    = "flotilla"
	Reviewer = "reviewer"
)

// Server is a running Gitea.
type Server struct {
	// URL is its root, e.g. http://127.0.0.1:39123 (no trailing slash).
	URL string
	// Token is an API token of Admin with every scope: for the API, and
	// for git over HTTP as basic auth's password (user Admin). Password is
	// Admin's password.
	Token, Password string
	dir             string
	cmd             *exec.Cmd
	done            chan struct{}
}

// Start runs Gitea in dir (created when missing) until Stop. It fails
// when the binary was not built (make fleet-build).
func Start(ctx context.Context, dir string) (*Server, error) {
	bin := Binary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("gitea %s not built (make fleet-build): %w", Version, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort(ctx)
	if err != nil {
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Password: random(12), dir: dir, done: make(chan struct{})}
	ini, err := s.writeConfig(port)
	if err != nil {
		return nil, err
	}
	if _, err := s.run(ctx, "migrate", "--config", ini); err != nil {
		return nil, err
	}
	if _, err := s.run(ctx, "admin", "user", "create", "--config", ini, "--admin", "--username", Admin,
		"--password", s.Password, "--email", Admin+"@test.invalid", "--must-change-password=false"); err != nil {
		return nil, err
	}
	if _, err := s.run(ctx, "admin", "user", "create", "--config", ini, "--username", Reviewer,
		"--password", random(12), "--email", Reviewer+"@test.invalid", "--must-change-password=false"); err != nil {
		return nil, err
	}
	out, err := s.run(ctx, "admin", "user", "generate-access-token", "--config", ini, "--username", Admin,
		"--token-name", "flotilla", "--scopes", "all", "--raw")
	if err != nil {
		return nil, err
	}
	s.Token = strings.TrimSpace(out)
	if err := s.serve(ctx, ini); err != nil {
		return nil, err
	}
	return s, nil
}

// writeConfig writes app.ini: SQLite, loopback only, no SSH, no mail, no
// registration, webhooks allowed to loopback (the default refuses them).
func (s *Server) writeConfig(port int) (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("APP_NAME = flotilla test gitea")
	p("RUN_USER = %s", u.Username)
	p("RUN_MODE = prod")
	p("WORK_PATH = %s", s.dir)
	if os.Geteuid() == 0 {
		p("I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true")
	}
	p("[server]")
	p("PROTOCOL = http")
	p("HTTP_ADDR = 127.0.0.1")
	p("HTTP_PORT = %d", port)
	p("ROOT_URL = %s/", s.URL)
	p("DISABLE_SSH = true")
	p("START_SSH_SERVER = false")
	p("OFFLINE_MODE = true")
	p("LFS_START_SERVER = false")
	p("APP_DATA_PATH = %s", filepath.Join(s.dir, "data"))
	p("[database]")
	p("DB_TYPE = sqlite3")
	p("PATH = %s", filepath.Join(s.dir, "gitea.db"))
	p("SQLITE_JOURNAL_MODE = WAL")
	p("[repository]")
	p("ROOT = %s", filepath.Join(s.dir, "repos"))
	p("DEFAULT_BRANCH = main")
	p("[security]")
	p("INSTALL_LOCK = true")
	p("ALLOWED_HOST_LIST = loopback") // webhooks to loopback (the default refuses them)
	p("SECRET_KEY = %s", random(32))
	p("INTERNAL_TOKEN = %s", random(48))
	p("[oauth2]")
	p("ENABLED = false")
	p("[webhook]")
	p("DELIVER_TIMEOUT = 10")
	p("[service]")
	p("DISABLE_REGISTRATION = true")
	p("[actions]")
	p("ENABLED = false")
	p("[indexer]")
	p("REPO_INDEXER_ENABLED = false")
	p("[cron]")
	p("ENABLED = false")
	p("[mailer]")
	p("ENABLED = false")
	// Info: the router's line per request (method, path, status, time)
	// besides the errors, so a test that failed can tell what Gitea did.
	p("[log]")
	p("MODE = console")
	p("LEVEL = Info")
	p("ROOT_PATH = %s", filepath.Join(s.dir, "log"))
	ini := filepath.Join(s.dir, "app.ini")
	return ini, os.WriteFile(ini, []byte(b.String()), 0o600)
}

// run runs one gitea command to its end and returns its output.
func (s *Server) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, Binary(), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "GITEA_WORK_DIR="+s.dir, "HOME="+s.dir)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("gitea %s: %w: %s", strings.Join(args[:min(3, len(args))], " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("gitea %s: %w", args[0], err)
	}
	return string(out), nil
}

// serve starts `gitea web` and waits until its health check answers.
func (s *Server) serve(ctx context.Context, ini string) error {
	logf, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = logf.Close() }()
	cmd := exec.CommandContext(context.WithoutCancel(ctx), Binary(), "web", "--config", ini) //nolint:gosec // the test's own binary
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "GITEA_WORK_DIR="+s.dir, "HOME="+s.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting gitea: %w", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/healthz", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("gitea exited while starting; see %s", s.LogPath())
		case <-ctx.Done():
			s.Stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("gitea not healthy after 90s; see %s", s.LogPath())
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s).
func (s *Server) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// LogPath is the file Gitea logs to (a request per line, and its errors).
func (s *Server) LogPath() string { return filepath.Join(s.dir, "gitea.log") }

// RepoURL is the HTTP clone URL of owner/name.
func (s *Server) RepoURL(owner, name string) string {
	return fmt.Sprintf("%s/%s/%s.git", s.URL, owner, name)
}

// freePort is a port Gitea binds once started (freeport: not one the
// kernel may hand to another process meanwhile).
func freePort(ctx context.Context) (int, error) { return freeport.Port(ctx) }

func random(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
