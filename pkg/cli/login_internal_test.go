package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

// TestLoginSSO: `flotilla login --sso`'s device flow against a real
// provider and flotilla's /auth/config, the login kept 0600, the ID token
// sent by a later call, and refreshed (the refresh token rotated) once it
// is about to expire.
func TestLoginSSO(t *testing.T) {
	provider, err := oidcop.Start([]oidcop.User{{Name: "alice", Password: "pw", Email: "alice@example.com", Groups: []string{"release-managers"}}},
		[]oidcop.Client{{ID: "flotilla", Secret: "s"}, {ID: "flotilla-cli"}})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	authn, err := api.NewAuthn(nil)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sessions.Close()
	authn.UseSSO(api.NewSSO(api.SSOConfig{Issuer: provider.Issuer, ClientID: "flotilla", ClientSecret: "s", CLIClientID: "flotilla-cli",
		GroupsClaim: "groups", SessionTTL: time.Hour, RedirectURL: "http://127.0.0.1:1/auth/callback"}, sessions, nil))
	mux := http.NewServeMux()
	authn.SSO().Register(mux)
	mux.Handle("/api/", authn.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := identity.FromContext(r.Context())
		_ = json.NewEncoder(w).Encode(p)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "flotilla", "config.yaml")
	t.Setenv(cliConfigEnv, path)

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ssoLogIn(t.Context(), pw, srv.URL); _ = pw.Close() }()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if _, code, ok := strings.Cut(line, "enter the code "); ok {
			res, err := http.PostForm(provider.Issuer+"/device", url.Values{"user_code": {code}, "username": {"alice"}, "password": {"pw"}})
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, printed.String())
	}
	if !strings.Contains(printed.String(), "Logged in to "+srv.URL+" as alice@example.com") {
		t.Errorf("login printed:\n%s", printed.String())
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the CLI config: %v %v, want mode 0600", fi, err)
	}
	whoami := func() identity.Principal {
		t.Helper()
		var p identity.Principal
		if err := (apiClient{base: srv.URL}).get(t.Context(), "/api/v1/whoami", &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := whoami(); p.Name != "alice@example.com" || strings.Join(p.Groups, ",") != "release-managers" {
		t.Errorf("whoami after the login: %+v", p)
	}
	c, err := readCLIConfig(path)
	if err != nil || len(c.Logins) != 1 {
		t.Fatalf("config %+v %v", c, err)
	}
	before := c.Logins[0]
	before.Expiry = time.Now() // about to expire: the next call refreshes
	if err := writeCLIConfig(path, c.withLogin(srv.URL, &before)); err != nil {
		t.Fatal(err)
	}
	if p := whoami(); p.Name != "alice@example.com" {
		t.Errorf("whoami after the refresh: %+v", p)
	}
	c, _ = readCLIConfig(path)
	if after := c.Logins[0]; after.RefreshToken == before.RefreshToken || after.IDToken == before.IDToken || !after.Expiry.After(time.Now().Add(refreshAhead)) {
		t.Errorf("the login was not refreshed: %+v", after)
	}
	if err := writeCLIConfig(path, c.withLogin(srv.URL, nil)); err != nil {
		t.Fatal(err)
	}
	if ssoBearer(t.Context(), srv.URL) != "" {
		t.Error("a bearer token after the logout")
	}
}

// TestLoginSSOBrowser: `flotilla login --sso --browser`'s code flow with
// PKCE through a loopback callback against a real provider: a redirect
// with another state is refused and the login goes on waiting, the
// browser's login at the provider comes back with the code, the login is
// kept where the device flow keeps it, and a later call is alice's.
func TestLoginSSOBrowser(t *testing.T) {
	provider, err := oidcop.Start([]oidcop.User{{Name: "alice", Password: "pw", Email: "alice@example.com", Groups: []string{"release-managers"}}},
		[]oidcop.Client{{ID: "flotilla", Secret: "s"}, {ID: "flotilla-cli", RedirectURIs: []string{"http://127.0.0.1" + ssoCallbackPath}}})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	srv := ssoTestServer(t, provider, "preferred_username")
	path := filepath.Join(t.TempDir(), "flotilla", "config.yaml")
	t.Setenv(cliConfigEnv, path)

	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ssoBrowserLogIn(t.Context(), pw, srv.URL, 0); _ = pw.Close() }()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	var authURL string
	for sc.Scan() {
		line := sc.Text()
		printed.WriteString(line + "\n")
		if strings.HasPrefix(line, provider.Issuer) {
			authURL = line
		}
		redirect, ok := strings.CutPrefix(line, "Waiting for the provider to redirect to ")
		if !ok {
			continue
		}
		redirect = strings.TrimSuffix(redirect, "...")
		// A forged redirect (another state) is refused; the login waits on.
		res, err := http.Get(redirect + "?code=forged&state=other")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			t.Errorf("a redirect with another state answered %d, want 400", res.StatusCode)
		}
		// The browser: the provider's form, then back to the callback.
		jar, _ := cookiejar.New(nil)
		browser := &http.Client{Jar: jar}
		res, err = browser.Get(authURL)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		id := res.Request.URL.Query().Get("authRequestID")
		if id == "" {
			t.Fatalf("not at the provider's login form: %s", res.Request.URL)
		}
		res, err = browser.PostForm(provider.Issuer+"/login", url.Values{"id": {id}, "username": {"alice"}, "password": {"pw"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Request.URL.String(), redirect) || !strings.Contains(string(body), "Logged in") {
			t.Errorf("the browser ended at %s: %d %s", res.Request.URL, res.StatusCode, body)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("login: %v\n%s", err, printed.String())
	}
	if !strings.Contains(printed.String(), "Logged in to "+srv.URL+" as alice@example.com") || !strings.Contains(authURL, "code_challenge_method=S256") {
		t.Errorf("login printed:\n%s", printed.String())
	}
	c, err := readCLIConfig(path)
	if err != nil || len(c.Logins) != 1 || c.Logins[0].RefreshToken == "" {
		t.Fatalf("config %+v %v, want one login with a refresh token", c, err)
	}
	var p identity.Principal
	if err := (apiClient{base: srv.URL}).get(t.Context(), "/api/v1/whoami", &p); err != nil {
		t.Fatal(err)
	}
	if p.Name != "alice@example.com" || strings.Join(p.Groups, ",") != "release-managers" {
		t.Errorf("whoami after the browser login: %+v", p)
	}
}

// ssoTestServer serves flotilla's /auth/* and an /api/ that answers the
// principal of the request, with single sign-on through provider.
func ssoTestServer(t *testing.T, provider *oidcop.Provider, usernameClaim string) *httptest.Server {
	t.Helper()
	authn, err := api.NewAuthn(nil)
	if err != nil {
		t.Fatal(err)
	}
	sessions, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sessions.Close() })
	authn.UseSSO(api.NewSSO(api.SSOConfig{Issuer: provider.Issuer, ClientID: "flotilla", ClientSecret: "s", CLIClientID: "flotilla-cli",
		GroupsClaim: "groups", UsernameClaim: usernameClaim, SessionTTL: time.Hour, RedirectURL: "http://127.0.0.1:1/auth/callback"}, sessions, nil))
	mux := http.NewServeMux()
	authn.SSO().Register(mux)
	mux.Handle("/api/", authn.Require(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := identity.FromContext(r.Context())
		_ = json.NewEncoder(w).Encode(p)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestLoginSSONamesAsFlotilla: `flotilla login --sso` says it logged in
// as whom flotilla takes the person for, by the server's username claim
// (server.sso.usernameClaim, in /auth/config): bob has no email and an
// opaque subject; his preferred_username names him, and where the server
// reads another claim, which the provider does not give, his subject does.
func TestLoginSSONamesAsFlotilla(t *testing.T) {
	const sub = "9c1e55f3-b1c2-4d47-a0e0-2b8f7c1e55d4"
	for _, tt := range []struct{ claim, want string }{{"preferred_username", "bob"}, {"nickname", sub}} {
		t.Run(tt.claim, func(t *testing.T) {
			provider, err := oidcop.Start([]oidcop.User{{Name: "bob", Subject: sub, Password: "pw", Groups: []string{"payments"}}},
				[]oidcop.Client{{ID: "flotilla", Secret: "s"}, {ID: "flotilla-cli"}})
			if err != nil {
				t.Fatal(err)
			}
			defer provider.Close()
			srv := ssoTestServer(t, provider, tt.claim)
			t.Setenv(cliConfigEnv, filepath.Join(t.TempDir(), "flotilla", "config.yaml"))
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() { done <- ssoLogIn(t.Context(), pw, srv.URL); _ = pw.Close() }()
			var printed strings.Builder
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				printed.WriteString(sc.Text() + "\n")
				if _, code, ok := strings.Cut(sc.Text(), "enter the code "); ok {
					res, err := http.PostForm(provider.Issuer+"/device", url.Values{"user_code": {code}, "username": {"bob"}, "password": {"pw"}})
					if err != nil {
						t.Fatal(err)
					}
					res.Body.Close()
				}
			}
			if err := <-done; err != nil {
				t.Fatalf("login: %v\n%s", err, printed.String())
			}
			if !strings.Contains(printed.String(), "Logged in to "+srv.URL+" as "+tt.want+"\n") {
				t.Errorf("login printed:\n%s\nwant it logged in as %s", printed.String(), tt.want)
			}
			var p identity.Principal
			if err := (apiClient{base: srv.URL}).get(t.Context(), "/api/v1/whoami", &p); err != nil {
				t.Fatal(err)
			}
			if p.Name != tt.want {
				t.Errorf("flotilla takes the login for %q, the CLI said %q", p.Name, tt.want)
			}
		})
	}
}

// TestWriteCLIConfigKeepsTheOldOnAFailedWrite: a write that fails (here
// the file size limit, as a full disk would) is an error and leaves the
// old config as it was, not replaced by the half-written one. The write's
// error was dropped before (a shadowed err), so the temporary file, empty
// or cut short, replaced the logins.
func TestWriteCLIConfigKeepsTheOldOnAFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	old := cliConfig{Logins: []ssoLogin{{Server: "https://a.example", Name: "alice"}}}
	if err := writeCLIConfig(path, old); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	next := old.withLogin("https://b.example", &ssoLogin{Server: "https://b.example", Name: "bob", RefreshToken: strings.Repeat("r", 4096)})

	// RLIMIT_FSIZE is the process's: no test of this package runs in
	// parallel, and the fleet's processes keep the limit they started with.
	signal.Ignore(syscall.SIGXFSZ) // EFBIG instead of the signal
	defer signal.Reset(syscall.SIGXFSZ)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Fatal(err)
	}
	small := lim
	small.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &small); err != nil {
		t.Fatal(err)
	}
	err = writeCLIConfig(path, next)
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("writeCLIConfig returned no error for a write cut short by the file size limit")
	}
	after, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if diff := cmp.Diff(string(before), string(after)); diff != "" {
		t.Errorf("a failed write changed the config (-before +after):\n%s", diff)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".config-*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
