package gitops

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/flotilla-cd/flotilla/pkg/testkit/gittest"
)

// gitHTTPServer serves the bare repositories under the directory of
// fileURL's repository over git's smart HTTP protocol with the real
// git-http-backend, behind basic auth as user:password.
func gitHTTPServer(t *testing.T, fileURL, user, password string) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git is not installed (make deps installs it): %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git's git-http-backend is missing (make deps installs git): %v", err)
	}
	dir := strings.TrimPrefix(fileURL, "file://")
	cgiHandler := &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + filepath.Dir(dir),
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(dir)
}

// TestBumpOverHTTP bumps through git's smart HTTP protocol with a token, and
// checks that a refused token is a permanent ErrAccess that does not show the
// token.
func TestBumpOverHTTP(t *testing.T) {
	url := gitHTTPServer(t, gittest.NewRepo(t, seedFiles(t)), "x-access-token", "good-token")
	change := Change{Image: api, Files: []File{{"apps/api/kustomization.yaml", Kustomize{}}}}

	res, err := Bump(t.Context(), Repo{URL: url, Auth: Auth{Token: "good-token"}}, change)
	if err != nil || !res.Changed {
		t.Fatalf("Bump = %+v, %v; want a commit", res, err)
	}

	_, err = Bump(t.Context(), Repo{URL: url, Auth: Auth{Token: "bad-token"}}, change)
	if !errors.Is(err, ErrAccess) || !IsPermanent(err) {
		t.Errorf("Bump with a bad token: error = %v, want a permanent ErrAccess", err)
	}
	if err != nil && strings.Contains(err.Error(), "bad-token") {
		t.Errorf("error %q shows the token", err)
	}
}

func TestAuthMethod(t *testing.T) {
	dir := t.TempDir()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(key)
	if err != nil {
		t.Fatal(err)
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	line := "git.example.com " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err := os.WriteFile(knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Run("token", func(t *testing.T) {
		m, err := Auth{Token: "tok"}.method()
		if b, ok := m.(*githttp.BasicAuth); err != nil || !ok || b.Username != "x-access-token" || b.Password != "tok" {
			t.Errorf("method = %#v, %v; want basic auth x-access-token:tok", m, err)
		}
	})
	t.Run("basic", func(t *testing.T) {
		m, err := Auth{Username: "u", Password: "p"}.method()
		if b, ok := m.(*githttp.BasicAuth); err != nil || !ok || b.Username != "u" || b.Password != "p" {
			t.Errorf("method = %#v, %v; want basic auth u:p", m, err)
		}
	})
	t.Run("none", func(t *testing.T) {
		if m, err := (Auth{}).method(); m != nil || err != nil {
			t.Errorf("method = %#v, %v; want none", m, err)
		}
	})
	t.Run("ssh key", func(t *testing.T) {
		m, err := Auth{SSHKeyFile: keyFile, SSHKnownHostsFile: knownHosts}.method()
		k, ok := m.(*gitssh.PublicKeys)
		if err != nil || !ok || k.User != "git" || k.HostKeyCallback == nil {
			t.Fatalf("method = %#v, %v; want git's public keys checked against known_hosts", m, err)
		}
	})
	t.Run("missing ssh key", func(t *testing.T) {
		_, err := Auth{SSHKeyFile: filepath.Join(dir, "nope")}.method()
		if !errors.Is(err, ErrInvalid) || !IsPermanent(err) {
			t.Errorf("method error = %v, want a permanent ErrInvalid", err)
		}
	})

	for _, tt := range []struct {
		auth Auth
		want string
	}{
		{Auth{}, "none"},
		{Auth{Username: "u", Password: "secret"}, "basic u"},
		{Auth{Token: "secret"}, "token"},
		{Auth{SSHKeyFile: "/keys/id", SSHKeyPassphrase: "secret"}, "ssh key /keys/id"},
	} {
		if got := tt.auth.String(); got != tt.want {
			t.Errorf("%s.String() = %q, want %q", tt.want, got, tt.want)
		}
	}
}
