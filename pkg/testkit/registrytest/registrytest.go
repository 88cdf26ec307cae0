package registrytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
)

// Binary is Debian's docker-registry.
const Binary = "/usr/bin/docker-registry"

// Options configure a Registry. The zero value is an open registry that
// notifies nobody.
type Options struct {
	// Users are the accounts the registry requires (name -> password),
	// checked with HTTP basic auth from an htpasswd file; none: anonymous
	// pulls and pushes.
	Users map[string]string
	// NotifyURL, when set, receives the registry's own notifications of
	// pushes and pulls (distribution's "notifications.endpoints"), with
	// NotifyHeaders on each request.
	NotifyURL     string
	NotifyHeaders map[string][]string
}

// Registry is a running docker-registry.
type Registry struct {
	// Host is host:port of the registry (plain HTTP on loopback, which
	// go-containerregistry and flotilla speak without being told).
	Host string
	// Log is the registry's log file.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Start runs docker-registry in dir (created when missing) and returns once
// it answers /v2/. It fails when the binary is not installed (make deps).
func Start(ctx context.Context, dir string, o Options) (*Registry, error) {
	if _, err := os.Stat(Binary); err != nil {
		return nil, fmt.Errorf("docker-registry is not installed (make deps): %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	addr, err := freeport.Addr(ctx)
	if err != nil {
		return nil, err
	}
	conf, err := config(dir, addr, o)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "registry.yaml")
	if err := os.WriteFile(path, conf, 0o600); err != nil {
		return nil, err
	}
	r := &Registry{Host: addr, Log: filepath.Join(dir, "registry.log"), done: make(chan struct{})}
	logf, err := os.Create(r.Log)
	if err != nil {
		return nil, err
	}
	r.cmd = exec.Command(Binary, "serve", path) //nolint:noctx // the registry outlives Start's context; Stop kills it
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting docker-registry: %w", err)
	}
	go func() { _ = r.cmd.Wait(); _ = logf.Close(); close(r.done) }()
	if err := r.waitServing(ctx, 30*time.Second); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// config is distribution's configuration: filesystem storage under dir,
// htpasswd auth when o has users, notifications when o has a URL.
func config(dir, addr string, o Options) ([]byte, error) {
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	c := map[string]any{
		"version": 0.1,
		"log":     map[string]any{"level": "info", "formatter": "text"},
		"storage": map[string]any{
			"filesystem": map[string]any{"rootdirectory": filepath.Join(dir, "data")},
			"delete":     map[string]any{"enabled": true},
		},
		"http": map[string]any{"addr": addr, "secret": hex.EncodeToString(secret)},
	}
	if len(o.Users) > 0 {
		htpasswd, err := writeHtpasswd(dir, o.Users)
		if err != nil {
			return nil, err
		}
		c["auth"] = map[string]any{"htpasswd": map[string]any{"realm": "registrytest", "path": htpasswd}}
	}
	if o.NotifyURL != "" {
		c["notifications"] = map[string]any{"endpoints": []map[string]any{{
			"name": "test", "url": o.NotifyURL, "headers": o.NotifyHeaders,
			"timeout": "2s", "threshold": 3, "backoff": "500ms",
		}}}
	}
	return yaml.Marshal(c)
}

func writeHtpasswd(dir string, users map[string]string) (string, error) {
	var b strings.Builder
	for name, password := range users {
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost) // checked on every request
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s:%s\n", name, hash)
	}
	path := filepath.Join(dir, "htpasswd")
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// waitServing polls /v2/ until the registry answers (200, or 401 when it
// requires users).
func (r *Registry) waitServing(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Host+"/v2/", nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.done:
			log, _ := os.ReadFile(r.Log)
			return fmt.Errorf("docker-registry exited: %s", log)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("docker-registry on %s not serving after %s", r.Host, timeout), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Stop kills the registry and waits for it to exit.
func (r *Registry) Stop() {
	if r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-r.done
}
