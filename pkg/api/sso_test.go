package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/oauth2"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

// openState is a real embedded store for the sessions, closed with the
// test.
func openState(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ssoServer is a flotilla's edge with SSO: /auth/* and a guarded
// /api/v1/whoami (GET) and /api/v1/stop (POST) answering the principal.
func ssoServer(t *testing.T, provider *oidcop.Provider, sessions api.SSOSessions, url string) http.Handler {
	t.Helper()
	return ssoServerOf(t, api.SSOConfig{Issuer: provider.Issuer, ClientID: "flotilla", ClientSecret: "web-secret", CLIClientID: "flotilla-cli",
		GroupsClaim: "groups", UsernameClaim: "preferred_username", SessionTTL: time.Hour, RedirectURL: url + "/auth/callback"}, sessions)
}

// ssoServerOf is ssoServer with the SSO of c.
func ssoServerOf(t *testing.T, c api.SSOConfig, sessions api.SSOSessions) http.Handler {
	t.Helper()
	authn, err := api.NewAuthn(map[string]string{"ci": "ci-secret"})
	if err != nil {
		t.Fatal(err)
	}
	authn.UseSSO(api.NewSSO(c, sessions, nil))
	mux := http.NewServeMux()
	authn.SSO().Register(mux)
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := identity.FromContext(r.Context())
		_ = json.NewEncoder(w).Encode(p)
	})
	mux.Handle("/api/", authn.Require(guarded))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ui") })
	return mux
}

// aliceSub is alice's subject at the site's provider: opaque, as
// Keycloak's, Okta's and Google's are.
const aliceSub = "f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55"

// ssoSite is a flotilla's edge with SSO (ssoServer) on a test server,
// its provider (alice, of payments; the web client and the CLI's) and the
// sessions' store.
type ssoSite struct {
	url      string
	provider *oidcop.Provider
	sessions *store.Store
	handler  http.Handler
}

// startSSOSite starts a site, its provider with opts; both are closed
// with the test.
func startSSOSite(t *testing.T, opts ...oidcop.Option) *ssoSite {
	t.Helper()
	s := &ssoSite{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	provider, err := oidcop.Start([]oidcop.User{{Name: "alice", Subject: aliceSub, Password: "pw", Email: "alice@example.com", Groups: []string{"payments"}}},
		[]oidcop.Client{{ID: "flotilla", Secret: "web-secret", RedirectURIs: []string{srv.URL + "/auth/callback"}}, {ID: "flotilla-cli"}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = provider.Close() })
	s.url, s.provider, s.sessions = srv.URL, provider, openState(t)
	s.handler = ssoServer(t, provider, s.sessions, srv.URL)
	return s
}

// logIn is alice's login in a browser, from /auth/login with query: the
// browser (its jar has the session), the session's cookie and the page
// the browser landed on.
func (s *ssoSite) logIn(t *testing.T, query string) (*http.Client, *http.Cookie, *url.URL) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err := browser.Get(s.url + "/auth/login" + query)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not at the provider's login: %s", res.Request.URL)
	}
	res, err = browser.PostForm(s.provider.Issuer+"/login", url.Values{"id": {id}, "username": {"alice"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range jar.Cookies(res.Request.URL) {
		if c.Name == api.SSOSessionCookie {
			return browser, c, res.Request.URL
		}
	}
	t.Fatal("no session cookie")
	return nil, nil, nil
}

// TestSSO: a person logs in through a real provider (code flow, PKCE,
// nonce), and the session names them and their groups, needs the CSRF
// header for a control, survives a new process on the same state, and
// ends at logout; a CLI's ID token of the CLI client is a bearer token,
// the web client's is not.
func TestSSO(t *testing.T) {
	site := startSSOSite(t)
	handler, provider := site.handler, site.provider
	browser, session, landed := site.logIn(t, "?next=/ui/rollouts/r1")
	if landed.Path != "/ui/rollouts/r1" {
		t.Fatalf("after the login the browser is at %s, want /ui/rollouts/r1", landed)
	}
	call := func(h http.Handler, method string, header http.Header) (int, identity.Principal) {
		t.Helper()
		req := httptest.NewRequest(method, "/api/v1/whoami", nil)
		req.Header = header
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var p identity.Principal
		_ = json.NewDecoder(rec.Body).Decode(&p)
		return rec.Code, p
	}
	cookie := http.Header{"Cookie": {session.String()}}
	// Named by the email, known also by the provider's username (what
	// separation of duties compares with a pusher) and the subject.
	want := identity.Principal{Subject: aliceSub, Name: "alice@example.com", Username: "alice", Groups: []string{"payments"}, Via: identity.ViaSession}
	if code, p := call(handler, http.MethodGet, cookie); code != 200 || !cmp.Equal(p, want) {
		t.Errorf("GET with the session: %d %s", code, cmp.Diff(want, p))
	}
	if code, _ := call(handler, http.MethodPost, cookie); code != http.StatusForbidden {
		t.Errorf("POST with the session and no CSRF header: %d, want 403", code)
	}
	withCSRF := cookie.Clone()
	withCSRF.Set(api.CSRFHeader, "1")
	if code, _ := call(handler, http.MethodPost, withCSRF); code != 200 {
		t.Errorf("POST with the session and the CSRF header: %d, want 200", code)
	}
	restarted := ssoServer(t, provider, site.sessions, site.url)
	if code, p := call(restarted, http.MethodGet, cookie); code != 200 || !cmp.Equal(p, want) {
		t.Errorf("after a restart: %d %s", code, cmp.Diff(want, p))
	}
	if code, _ := call(handler, http.MethodGet, http.Header{"Cookie": {api.SSOSessionCookie + "=forged"}}); code != http.StatusUnauthorized {
		t.Errorf("a forged session: %d, want 401", code)
	}
	if code, _ := call(handler, http.MethodGet, http.Header{"Authorization": {"Bearer ci-secret"}}); code != 200 {
		t.Errorf("the API token: %d, want 200", code)
	}

	// No credential: the 401 says how to log in through the provider.
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(method, "/api/v1/whoami", nil))
		if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "flotilla login --sso, or /auth/login in a browser") {
			t.Errorf("%s with no credential: %d %s, want 401 naming the SSO login", method, rec.Code, rec.Body)
		}
	}

	// The CLI's device flow: its ID token is a bearer token.
	discovered, err := oidc.NewProvider(t.Context(), provider.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	cli := oauth2.Config{ClientID: "flotilla-cli", Endpoint: discovered.Endpoint(), Scopes: []string{"openid", "email", "profile", "groups"}}
	da, err := cli.DeviceAuth(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.PostForm(provider.Issuer+"/device", url.Values{"user_code": {da.UserCode}, "username": {"alice"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tok, err := cli.DeviceAccessToken(t.Context(), da)
	if err != nil {
		t.Fatal(err)
	}
	idt, _ := tok.Extra("id_token").(string)
	want.Via = identity.ViaToken
	if code, p := call(handler, http.MethodPost, http.Header{"Authorization": {"Bearer " + idt}}); code != 200 || !cmp.Equal(p, want) {
		t.Errorf("the CLI's ID token: %d %s", code, cmp.Diff(want, p))
	}
	forged := idt[:len(idt)-4] + strings.Repeat("A", 4)
	if code, _ := call(handler, http.MethodGet, http.Header{"Authorization": {"Bearer " + forged}}); code != http.StatusUnauthorized {
		t.Errorf("a forged ID token: %d, want 401", code)
	}

	// Logout ends the session for every process reading the state.
	req, _ := http.NewRequest(http.MethodPost, site.url+"/auth/logout", nil)
	res, err = browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if code, _ := call(restarted, http.MethodGet, cookie); code != http.StatusUnauthorized {
		t.Errorf("after the logout: %d, want 401", code)
	}
}

// A callback whose state is not the browser's login's is refused.
func TestSSOCallbackState(t *testing.T) {
	provider, err := oidcop.Start(nil, []oidcop.Client{{ID: "flotilla", Secret: "web-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	h := ssoServer(t, provider, openState(t), "http://127.0.0.1:1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	if rec.Code != http.StatusFound {
		t.Fatalf("login: %d", rec.Code)
	}
	flow := rec.Result().Cookies()[0]
	req := httptest.NewRequest(http.MethodGet, "/auth/callback?code=x&state=not-the-one", nil)
	req.AddCookie(flow)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "state does not match") {
		t.Errorf("callback with another state: %d %s", rec.Code, rec.Body)
	}
}

// SweepSessions deletes the expired and the ended sessions, on the
// embedded store as on any state, and keeps the live ones.
func TestSweepSessions(t *testing.T) {
	st := openState(t)
	now := time.Now()
	ended := now.Add(-time.Minute)
	sessions := map[string]any{
		"live":    map[string]any{"name": "alice", "createdAt": now, "expiresAt": now.Add(time.Hour)},
		"expired": map[string]any{"name": "bob", "createdAt": now.Add(-2 * time.Hour), "expiresAt": now.Add(-time.Hour)},
		"ended":   map[string]any{"name": "carol", "createdAt": now, "expiresAt": now.Add(time.Hour), "endedAt": ended},
		"garbled": "not a session",
	}
	for k, v := range sessions {
		if err := st.Put(t.Context(), api.SSOSessionCollection, k, v); err != nil {
			t.Fatal(err)
		}
	}
	s := api.NewSSO(api.SSOConfig{Issuer: "http://127.0.0.1:1", ClientID: "flotilla", SessionTTL: time.Hour}, st, nil)
	n, err := s.SweepSessions(t.Context())
	if err != nil || n != 3 {
		t.Errorf("SweepSessions = %d, %v; want 3 deleted", n, err)
	}
	var left []string
	if err := st.List(t.Context(), api.SSOSessionCollection, func(k string, _ []byte) error { left = append(left, k); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"live"}, left); diff != "" {
		t.Errorf("sessions left (-want +got):\n%s", diff)
	}
}

// TestSSORefresh: a web session whose ID token expired asks the provider
// for a new one with the refresh token (kept sealed in the state): the
// person's new groups apply, the rotated refresh token is kept (a second
// refresh works), and once the provider revokes the login the refresh is
// refused, the session ends and says how to log in again.
func TestSSORefresh(t *testing.T) {
	const lifetime = 2 * time.Second
	site := startSSOSite(t, oidcop.TokenLifetime(lifetime))
	handler, provider, sessions := site.handler, site.provider, site.sessions
	_, session, _ := site.logIn(t, "")
	cookie := http.Header{"Cookie": {session.String()}}
	var stored string
	_ = sessions.List(t.Context(), api.SSOSessionCollection, func(_ string, raw []byte) error { stored = string(raw); return nil })
	if !strings.Contains(stored, `"refresh":"`) || !strings.Contains(stored, `"idTokenExpiry":"`) {
		t.Fatalf("the session keeps no sealed refresh token: %s", stored)
	}
	whoami := func() (int, string, identity.Principal) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/v1/whoami", nil)
		req.Header = cookie
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		var p identity.Principal
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		return rec.Code, rec.Body.String(), p
	}
	expire := func() { t.Helper(); time.Sleep(lifetime + 100*time.Millisecond) }

	if code, body, p := whoami(); code != 200 || strings.Join(p.Groups, ",") != "payments" {
		t.Fatalf("after the login: %d %s", code, body)
	}
	provider.SetGroups("alice", []string{"release-managers"})
	expire()
	// The refreshed session keeps her names: the username is one.
	if code, body, p := whoami(); code != 200 || strings.Join(p.Groups, ",") != "release-managers" || p.Username != "alice" || p.Subject != aliceSub ||
		provider.Refreshes("alice") != 1 {
		t.Fatalf("after the first refresh: %d %s, %d refreshes", code, body, provider.Refreshes("alice"))
	}
	expire()
	if code, body, _ := whoami(); code != 200 || provider.Refreshes("alice") != 2 {
		t.Fatalf("after the second refresh (the rotated token): %d %s, %d refreshes", code, body, provider.Refreshes("alice"))
	}
	if n := provider.RevokeLogins("alice"); n != 1 {
		t.Fatalf("revoked %d refresh tokens, want 1", n)
	}
	expire()
	if code, body, _ := whoami(); code != http.StatusUnauthorized || !strings.Contains(body, "refused to refresh it; log in again at /ui/login") {
		t.Errorf("after the revocation: %d %s, want 401 saying the refresh was refused", code, body)
	}
	if code, body, _ := whoami(); code != http.StatusUnauthorized || !strings.Contains(body, "has expired or ended: log in again at /ui/login") {
		t.Errorf("the ended session: %d %s, want 401", code, body)
	}
}

// TestSSOOfflineAccess: the web client's authorization URL and the CLI's
// /auth/config ask offline_access unless NoOfflineAccess
// (server.sso.offlineAccess: false). A provider that refuses the scope,
// as Google does, ends the default login with its invalid_scope and the
// switch to set; with the switch the login works on the same provider, the
// session keeps no refresh token, and it ends with 401 and the login hint
// once its ID token expired, without asking the provider.
func TestSSOOfflineAccess(t *testing.T) {
	const lifetime = 2 * time.Second
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer srv.Close()
	provider, err := oidcop.Start([]oidcop.User{{Name: "alice", Password: "pw", Email: "alice@example.com", Groups: []string{"payments"}}},
		[]oidcop.Client{{ID: "flotilla", Secret: "web-secret", RedirectURIs: []string{srv.URL + "/auth/callback"}}, {ID: "flotilla-cli"}},
		oidcop.TokenLifetime(lifetime), oidcop.RefuseScopes(oidc.ScopeOfflineAccess))
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	sessions := openState(t)
	config := func(noOffline bool) api.SSOConfig {
		return api.SSOConfig{Issuer: provider.Issuer, ClientID: "flotilla", ClientSecret: "web-secret", CLIClientID: "flotilla-cli",
			GroupsClaim: "groups", SessionTTL: time.Hour, RedirectURL: srv.URL + "/auth/callback", NoOfflineAccess: noOffline}
	}
	base := []string{"openid", "email", "profile", "groups"}
	for _, tt := range []struct {
		name      string
		noOffline bool
		want      []string
	}{
		{"default", false, append([]string{"offline_access"}, base...)},
		{"offlineAccess false", true, base},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := ssoServerOf(t, config(tt.noOffline), sessions)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
			loc, err := url.Parse(rec.Header().Get("Location"))
			if rec.Code != http.StatusFound || err != nil {
				t.Fatalf("/auth/login: %d %s", rec.Code, rec.Header().Get("Location"))
			}
			if diff := cmp.Diff(tt.want, strings.Fields(loc.Query().Get("scope"))); diff != "" {
				t.Errorf("the authorization URL's scope (-want +got):\n%s", diff)
			}
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/config", nil))
			var c api.SSOClientConfig
			if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
				t.Fatalf("/auth/config: %d %s", rec.Code, rec.Body)
			}
			if diff := cmp.Diff(tt.want, c.Scopes); diff != "" {
				t.Errorf("the CLI's scopes (-want +got):\n%s", diff)
			}
		})
	}

	// The provider refuses the default login.
	handler = ssoServerOf(t, config(false), sessions)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err := browser.Get(srv.URL + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "invalid_scope") ||
		!strings.Contains(string(body), "set server.sso.offlineAccess: false") {
		t.Errorf("a login asking offline_access of a provider that refuses it: %d %s, want 401 naming invalid_scope and the switch", res.StatusCode, body)
	}

	// Without offline_access: logged in, no refresh token, ended with the
	// ID token.
	handler = ssoServerOf(t, config(true), sessions)
	res, err = browser.Get(srv.URL + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not at the provider's login: %d %s", res.StatusCode, res.Request.URL)
	}
	res, err = browser.PostForm(provider.Issuer+"/login", url.Values{"id": {id}, "username": {"alice"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loggedIn := time.Now()
	var cookie http.Header
	for _, c := range jar.Cookies(res.Request.URL) {
		if c.Name == api.SSOSessionCookie {
			cookie = http.Header{"Cookie": {c.String()}}
		}
	}
	if cookie == nil {
		t.Fatalf("no session cookie after the login (at %s)", res.Request.URL)
	}
	type session struct {
		ExpiresAt time.Time `json:"expiresAt"`
		Refresh   string    `json:"refresh"`
	}
	var stored []session
	err = sessions.List(t.Context(), api.SSOSessionCollection, func(_ string, raw []byte) error {
		var d session
		err := json.Unmarshal(raw, &d)
		stored = append(stored, d)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Refresh != "" || stored[0].ExpiresAt.After(loggedIn.Add(lifetime)) {
		t.Fatalf("the state keeps %+v, want one session without a refresh token, ending within %s of the login", stored, lifetime)
	}
	if n := provider.RefreshTokens("alice"); n != 0 {
		t.Errorf("the provider issued alice %d refresh tokens, want none", n)
	}
	whoami := func() (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/whoami", nil)
		req.Header = cookie
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := whoami(); code != 200 || !strings.Contains(body, "alice@example.com") {
		t.Fatalf("after the login: %d %s", code, body)
	}
	time.Sleep(time.Until(stored[0].ExpiresAt) + 100*time.Millisecond)
	if code, body := whoami(); code != http.StatusUnauthorized || !strings.Contains(body, "has expired or ended: log in again at /ui/login") {
		t.Errorf("once the ID token expired: %d %s, want 401 with the login hint", code, body)
	}
	if n := provider.Refreshes("alice"); n != 0 {
		t.Errorf("the provider answered %d refreshes, want none", n)
	}
}

// TestSSOScopes: SSOConfig.Scopes (server.sso.scopes) replace the default
// scopes, for the web client and the CLI alike, offline_access still
// asked first. A provider that refuses the scope groups, as Google does,
// and gives the groups under a scope of its own, as a Keycloak client
// scope does, ends the default login with its invalid_scope and the
// field to change; with the provider's scope instead of groups alice
// logs in and her session holds her groups.
func TestSSOScopes(t *testing.T) {
	site := startSSOSite(t, oidcop.GroupsScope("team"), oidcop.RefuseScopes("groups"))
	config := func(scopes []string) api.SSOConfig {
		return api.SSOConfig{Issuer: site.provider.Issuer, ClientID: "flotilla", ClientSecret: "web-secret", CLIClientID: "flotilla-cli",
			GroupsClaim: "groups", UsernameClaim: "upn", SessionTTL: time.Hour, RedirectURL: site.url + "/auth/callback", Scopes: scopes}
	}

	// The default scopes ask groups: refused, saying which field to change.
	jar, _ := cookiejar.New(nil)
	res, err := (&http.Client{Jar: jar}).Get(site.url + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "invalid_scope") ||
		!strings.Contains(string(body), "if it does not grant one of openid, email, profile, groups, leave it out of server.sso.scopes") {
		t.Errorf("a login asking groups of a provider that refuses it: %d %s, want 401 naming invalid_scope and server.sso.scopes", res.StatusCode, body)
	}

	site.handler = ssoServerOf(t, config([]string{"openid", "email", "profile", "team"}), site.sessions)
	want := []string{"offline_access", "openid", "email", "profile", "team"}
	rec := httptest.NewRecorder()
	site.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/login", nil))
	loc, err := url.Parse(rec.Header().Get("Location"))
	if rec.Code != http.StatusFound || err != nil {
		t.Fatalf("/auth/login: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	if diff := cmp.Diff(want, strings.Fields(loc.Query().Get("scope"))); diff != "" {
		t.Errorf("the authorization URL's scope (-want +got):\n%s", diff)
	}
	rec = httptest.NewRecorder()
	site.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/auth/config", nil))
	var c api.SSOClientConfig
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
		t.Fatalf("/auth/config: %d %s", rec.Code, rec.Body)
	}
	if diff := cmp.Diff(want, c.Scopes); diff != "" {
		t.Errorf("the CLI's scopes (-want +got):\n%s", diff)
	}
	if c.UsernameClaim != "upn" {
		t.Errorf("/auth/config gives the CLI the username claim %q, want the server's upn", c.UsernameClaim)
	}

	_, session, _ := site.logIn(t, "")
	req := httptest.NewRequest(http.MethodGet, "/api/v1/whoami", nil)
	req.AddCookie(session)
	rec = httptest.NewRecorder()
	site.handler.ServeHTTP(rec, req)
	var p identity.Principal
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("whoami: %d %s", rec.Code, rec.Body)
	}
	if p.Name != "alice@example.com" || !slices.Equal(p.Groups, []string{"payments"}) {
		t.Errorf("the session is %+v, want alice@example.com in group payments (the provider's scope team)", p)
	}
}

// TestSSOSecureCookies: behind an https externalURL (a TLS server, its
// redirect URL https://127.0.0.1:<port>/auth/callback) the login's flow
// cookie and the session's cookie are Secure, HttpOnly and SameSite=Lax,
// and the login through the provider works with them.
func TestSSOSecureCookies(t *testing.T) {
	var handler http.Handler
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	defer srv.Close()
	provider, err := oidcop.Start([]oidcop.User{{Name: "alice", Password: "pw", Email: "alice@example.com", Groups: []string{"payments"}}},
		[]oidcop.Client{{ID: "flotilla", Secret: "web-secret", RedirectURIs: []string{srv.URL + "/auth/callback"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer provider.Close()
	handler = ssoServerOf(t, api.SSOConfig{Issuer: provider.Issuer, ClientID: "flotilla", ClientSecret: "web-secret",
		GroupsClaim: "groups", SessionTTL: time.Hour, RedirectURL: srv.URL + "/auth/callback"}, openState(t))
	browser := srv.Client()
	browser.Jar, _ = cookiejar.New(nil)
	var set []*http.Cookie
	browser.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		set = append(set, req.Response.Cookies()...)
		return nil
	}
	res, err := browser.Get(srv.URL + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("not at the provider's login: %s", res.Request.URL)
	}
	res, err = browser.PostForm(provider.Issuer+"/login", url.Values{"id": {id}, "username": {"alice"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	type cookie struct {
		Name             string
		Secure, HTTPOnly bool
		SameSite         http.SameSite
	}
	var got []cookie
	for _, c := range set {
		if c.MaxAge >= 0 { // the flow cookie's deletion aside
			got = append(got, cookie{c.Name, c.Secure, c.HttpOnly, c.SameSite})
		}
	}
	want := []cookie{{"flotilla_sso_flow", true, true, http.SameSiteLaxMode}, {api.SSOSessionCookie, true, true, http.SameSiteLaxMode}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the cookies set (-want +got):\n%s", diff)
	}
	if res.Request.URL.Host != strings.TrimPrefix(srv.URL, "https://") {
		t.Errorf("after the login the browser is at %s, want back at flotilla", res.Request.URL)
	}
}
