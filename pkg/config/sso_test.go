package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// server.sso: its defaults, and each missing or wrong field refused by
// its name.
func TestSSO(t *testing.T) {
	t.Setenv("SSO_SECRET", "s3cret")
	full := func() *SSO {
		return &SSO{Issuer: "https://login.example.com", ClientID: "flotilla", ClientSecret: &Secret{Env: "SSO_SECRET"}, CLIClientID: "flotilla-cli"}
	}
	tests := []struct {
		name string
		edit func(*SSO)
		want string
	}{
		{"complete", func(*SSO) {}, ""},
		{"no issuer", func(s *SSO) { s.Issuer = "" }, "server.sso.issuer: required: an http or https URL"},
		{"issuer not http", func(s *SSO) { s.Issuer = "ldap://x" }, `server.sso.issuer: want an http or https URL, got scheme "ldap"`},
		{"issuer with a query", func(s *SSO) { s.Issuer = "https://x/?a=1" }, `server.sso.issuer: "https://x/?a=1" has a query or fragment: want the issuer URL exactly as the provider's tokens name it`},
		{"no client", func(s *SSO) { s.ClientID = "" }, "server.sso.clientID: required: the web UI's client id at the provider"},
		{"no secret", func(s *SSO) { s.ClientSecret = nil }, "server.sso.clientSecret: required: where the web UI client's secret comes from (env or file)"},
		{"secret unset", func(s *SSO) { s.ClientSecret = &Secret{Env: "SSO_NOT_SET"} }, `server.sso.clientSecret.env: environment variable "SSO_NOT_SET" is not set or is empty`},
		{"one client for both", func(s *SSO) { s.CLIClientID = s.ClientID },
			`server.sso.cliClientID: "flotilla" is the web UI's client: the CLI needs its own public client (device grant), or its tokens would be the web client's`},
		{"session too long", func(s *SSO) { s.SessionTTL.Duration = 30 * 24 * time.Hour }, "server.sso.sessionTTL: 720h0m0s is out of range: want 1m to 168h0m0s"},
		{"session too short", func(s *SSO) { s.SessionTTL.Duration = time.Second }, "server.sso.sessionTTL: 1s is out of range: want 1m to 168h0m0s"},
		{"scopes without groups", func(s *SSO) { s.Scopes = []string{"openid", "email", "profile"} }, ""},
		{"scopes without openid", func(s *SSO) { s.Scopes = []string{"email", "groups"} },
			"server.sso.scopes: [email groups] lacks openid: an OpenID Connect login asks it"},
		{"scopes with offline_access", func(s *SSO) { s.Scopes = []string{"openid", "offline_access"} },
			"server.sso.scopes[1]: offline_access is asked unless server.sso.offlineAccess is false: leave it out of scopes"},
		{"scope with a space", func(s *SSO) { s.Scopes = []string{"openid", "read groups"} },
			`server.sso.scopes[1]: "read groups" is not a scope: want printable ASCII without spaces, quotes or backslashes (RFC 6749 3.3)`},
		{"empty scope", func(s *SSO) { s.Scopes = []string{"openid", ""} },
			`server.sso.scopes[1]: "" is not a scope: want printable ASCII without spaces, quotes or backslashes (RFC 6749 3.3)`},
		{"scope twice", func(s *SSO) { s.Scopes = []string{"openid", "groups", "groups"} }, "server.sso.scopes[2]: groups is listed twice"},
		{"no scopes", func(s *SSO) { s.Scopes = []string{} }, "server.sso.scopes: [] lacks openid: an OpenID Connect login asks it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := full()
			ssoDefaults(s, "/etc/flotilla")
			tt.edit(s)
			v := &validator{}
			v.sso(s)
			var errs []string
			for _, p := range v.problems {
				errs = append(errs, p.Path+": "+p.Message)
			}
			if diff := cmp.Diff(tt.want, strings.Join(errs, "\n")); diff != "" {
				t.Errorf("validation (-want +got):\n%s", diff)
			}
		})
	}
	s := full()
	ssoDefaults(s, "/etc/flotilla")
	(&validator{}).sso(s)
	if s.GroupsClaim != "groups" || s.UsernameClaim != "preferred_username" || s.SessionTTL.Duration != 12*time.Hour || s.ClientSecretValue != "s3cret" || !s.AsksOfflineAccess() {
		t.Errorf("defaults: groupsClaim %q, usernameClaim %q, sessionTTL %s, secret resolved %v, offline_access asked %v",
			s.GroupsClaim, s.UsernameClaim, s.SessionTTL, s.ClientSecretValue != "", s.AsksOfflineAccess())
	}
	kept := full()
	kept.UsernameClaim = "upn"
	ssoDefaults(kept, "/etc/flotilla")
	if kept.UsernameClaim != "upn" {
		t.Errorf("usernameClaim upn became %q", kept.UsernameClaim)
	}
	if diff := cmp.Diff([]string{"openid", "email", "profile", "groups"}, s.Scopes); diff != "" {
		t.Errorf("default scopes (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		set  *bool
		want bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		if got := (SSO{OfflineAccess: tc.set}).AsksOfflineAccess(); got != tc.want {
			t.Errorf("AsksOfflineAccess() with offlineAccess %v = %t, want %t", tc.set, got, tc.want)
		}
	}
	for ext, want := range map[string]string{
		"http://127.0.0.1:8080":            "http://127.0.0.1:8080/auth/callback",
		"https://cd.example.com/flotilla/": "https://cd.example.com/flotilla/auth/callback",
		"https://cd.example.com/?x=1#y":    "https://cd.example.com/auth/callback",
	} {
		if got := SSORedirectURL(ext); got != want {
			t.Errorf("SSORedirectURL(%q) = %q, want %q", ext, got, want)
		}
	}
}

// config/example.yaml's commented server.sso block, uncommented, is valid
// and says what it shows.
func TestExampleSSO(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	found := false
	for i, l := range lines {
		if l == "  # sso:" {
			found = true
			lines[i] = "  sso:"
			for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "  #   "); j++ {
				lines[j] = "    " + strings.TrimPrefix(lines[j], "  #   ")
			}
		}
	}
	if !found {
		t.Fatal(`example.yaml has no commented "  # sso:" block`)
	}
	doc := strings.Join(lines, "\n")
	tmp := t.TempDir()
	for _, c := range []string{"c1", "c2", "c3"} {
		writeFile(t, filepath.Join(tmp, c, "kubeconfig"), "apiVersion: v1\nkind: Config\n")
	}
	doc = strings.ReplaceAll(doc, fleetDir, tmp+"/")
	for _, env := range []string{"FLOTILLA_REGISTRY_TOKEN", "FLOTILLA_GITHUB_SECRET", "FLOTILLA_FLAGGER_TOKEN", "FLOTILLA_DEPLOYMENTS_TOKEN", "FLOTILLA_API_TOKEN", "FLOTILLA_SSO_CLIENT_SECRET"} {
		t.Setenv(env, "x")
	}
	c, err := Parse([]byte(doc), filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("example.yaml with sso:\n%v", err)
	}
	want := &SSO{Issuer: "https://login.example.com/realms/platform", ClientID: "flotilla", ClientSecret: &Secret{Env: "FLOTILLA_SSO_CLIENT_SECRET"},
		ClientSecretValue: "x", CLIClientID: "flotilla-cli", GroupsClaim: "groups", UsernameClaim: "preferred_username", SessionTTL: Duration{12 * time.Hour}, OfflineAccess: ptr.To(true),
		Scopes: []string{"openid", "email", "profile", "groups"}}
	if diff := cmp.Diff(want, c.Server.SSO); diff != "" {
		t.Errorf("sso (-want +got):\n%s", diff)
	}
}

// server.sessionSweepInterval: 10m unless set, 1s to 24h.
func TestSessionSweepInterval(t *testing.T) {
	tests := []struct {
		name    string
		set     time.Duration
		want    time.Duration
		problem string
	}{
		{name: "unset", want: 10 * time.Minute},
		{name: "a second", set: time.Second, want: time.Second},
		{name: "a day", set: 24 * time.Hour, want: 24 * time.Hour},
		{name: "too short", set: 500 * time.Millisecond, want: 500 * time.Millisecond,
			problem: "server.sessionSweepInterval: 500ms is out of range: want 1s to 24h"},
		{name: "too long", set: 25 * time.Hour, want: 25 * time.Hour, problem: "server.sessionSweepInterval: 25h0m0s is out of range: want 1s to 24h"},
		{name: "negative", set: -time.Minute, want: -time.Minute, problem: "server.sessionSweepInterval: -1m0s is out of range: want 1s to 24h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Server{SessionSweepInterval: Duration{tt.set}}
			v := &validator{}
			v.sessionSweep(&s)
			var errs []string
			for _, p := range v.problems {
				errs = append(errs, p.Path+": "+p.Message)
			}
			if diff := cmp.Diff(tt.problem, strings.Join(errs, "\n")); diff != "" {
				t.Errorf("validation (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, s.SessionSweep()); diff != "" {
				t.Errorf("SessionSweep (-want +got):\n%s", diff)
			}
		})
	}
}

// server.sso.offlineAccess takes true or false only, refused by its path.
func TestSSOOfflineAccessParse(t *testing.T) {
	doc := "server:\n  sso:\n    offlineAccess: sometimes\n"
	_, err := Parse([]byte(doc), t.TempDir())
	want := `parsing config: line 3: server.sso.offlineAccess: want true or false, got "sometimes"`
	if err == nil || err.Error() != want {
		t.Errorf("Parse: %v, want %s", err, want)
	}
}
