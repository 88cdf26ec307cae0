package api

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Single sign-on through an OpenID provider (server.sso,
// docs/design/identity.md "Single sign-on"): the web UI's code flow with
// PKCE and its sessions, and the CLI's ID tokens sent as bearer tokens.
const (
	// SSOSessionCookie holds the opaque id of a person's web session; the
	// session itself is a document of the state port (SSOSessions), so it
	// survives a restart and every replica reads it.
	SSOSessionCookie = "flotilla_sso"
	// ssoFlowCookie carries a login's state, nonce and PKCE verifier from
	// /auth/login to /auth/callback, signed, for ten minutes.
	ssoFlowCookie = "flotilla_sso_flow"
	ssoFlowTTL    = 10 * time.Minute
	// SSOSessionCollection is the state documents' collection of the
	// sessions, keyed by the SHA-256 of their id (the store never holds a
	// cookie that would open one).
	SSOSessionCollection = "sso-sessions"

	// The routes of SSO, outside the API's authentication.
	SSOLoginPath    = "/auth/login"    // GET ?next=/ui/...: to the provider
	SSOCallbackPath = "/auth/callback" // GET: back from it
	SSOLogoutPath   = "/auth/logout"   // POST: ends the session
	SSOConfigPath   = "/auth/config"   // GET: what `flotilla login --sso` needs

	msgSSOSessionInvalid = "the single sign-on session has expired or ended: log in again at /ui/login"
	msgSSORefreshRefused = "the single sign-on session has ended: the identity provider refused to refresh it; log in again at /ui/login"
	msgNoCLIClient       = "this flotilla takes no ID token as a bearer token: set server.sso.cliClientID"
)

// SSOScopes are the scopes asked of the provider unless SSOConfig.Scopes
// lists others.
var SSOScopes = []string{oidc.ScopeOpenID, "email", "profile", "groups"}

// SSOConfig is server.sso, resolved.
type SSOConfig struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	CLIClientID  string // "" refuses ID tokens as bearer tokens
	GroupsClaim  string
	// UsernameClaim is the claim of the person's login name at the
	// provider (server.sso.usernameClaim): one of their names
	// (identity.OfClaims). "" reads none.
	UsernameClaim string
	SessionTTL    time.Duration
	// NoOfflineAccess asks the provider no offline_access (no refresh
	// token), the web client and the CLI alike: a web session then ends
	// when its ID token expires (server.sso.offlineAccess: false).
	NoOfflineAccess bool
	// Scopes are asked instead of SSOScopes, when set
	// (server.sso.scopes); offline_access is asked besides unless
	// NoOfflineAccess.
	Scopes []string
	// RedirectURL is server.externalURL + /auth/callback. Cookies are
	// Secure unless it is plain http on a loopback host.
	RedirectURL string
}

// SSOSessions is the part of the state port the sessions are kept in
// (pkg/store, pkg/state/natskv).
type SSOSessions interface {
	Get(ctx context.Context, collection, key string, v any) (bool, error)
	Put(ctx context.Context, collection, key string, v any) error
	List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error
	Delete(ctx context.Context, collection, key string) error
}

// ssoSession is a session's document.
type ssoSession struct {
	Subject   string     `json:"subject"`
	Name      string     `json:"name"`
	Username  string     `json:"username,omitempty"`
	Groups    []string   `json:"groups,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// IDTokenExpiry is when the session's last ID token expires: from
	// then on, a request of the session first asks the provider for a new
	// one with the refresh token (refresh). Zero: no refresh token was
	// given, and the session lasts until ExpiresAt as it is, which is
	// then no later than its ID token's expiry.
	IDTokenExpiry time.Time `json:"idTokenExpiry,omitzero"`
	// Refresh is the provider's refresh token, sealed with a key derived
	// from the session's id (sealRefresh): the state never holds a value
	// that refreshes a session without its cookie.
	Refresh string `json:"refresh,omitempty"`
	// RefreshedAt is the last refresh's time (nil: none yet).
	RefreshedAt *time.Time `json:"refreshedAt,omitempty"`
}

// SSO logs people in through the provider of c.
type SSO struct {
	c        SSOConfig
	sessions SSOSessions
	log      *slog.Logger
	now      func() time.Time
	secure   bool
	flowKey  []byte

	// endSession ends a created token's stored session too (Authn's
	// EndSession), as logout drops both kinds of cookie.
	endSession func(ctx context.Context, value string) error
	// logins counts the logins (Authn's flotilla_web_logins_total).
	logins func(method string, ok bool)

	mu       sync.Mutex
	provider *oidc.Provider // discovered at first use, and again after a failure

	// refreshing holds a lock per session key: one refresh at a time of a
	// session in this process (the page's concurrent calls wait for it
	// and take its result, rather than spending the rotated refresh token
	// twice).
	refreshing sync.Map // session key -> *sync.Mutex
	// refreshes counts the sessions' refreshes by result (Authn's
	// flotilla_sso_session_refreshes_total).
	refreshes func(result string)
}

// NewSSO returns the single sign-on of c, its sessions kept in sessions.
// The provider is discovered at first use, so a provider down at start
// delays logins, not flotilla.
func NewSSO(c SSOConfig, sessions SSOSessions, log *slog.Logger) *SSO {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	key := sha256.Sum256([]byte("flotilla-sso-flow|" + c.ClientSecret)) // every replica signs alike
	return &SSO{c: c, sessions: sessions, log: log, now: time.Now, secure: !plainLoopback(c.RedirectURL), flowKey: key[:]}
}

// UseSSO has a take the SSO's sessions and, from the CLI, ID tokens of
// its provider as bearer tokens, before the API tokens. Call it before
// serving.
func (a *Authn) UseSSO(s *SSO) {
	a.sso = s
	s.endSession = a.EndSession
	s.logins = a.countLogin
	s.refreshes = func(result string) { a.refreshes.WithLabelValues(result).Inc() }
}

// SSO is the single sign-on UseSSO gave a (nil: none).
func (a *Authn) SSO() *SSO { return a.sso }

// plainLoopback says whether u is http:// on a loopback host (tests and a
// laptop), where a Secure cookie would never come back.
func plainLoopback(u string) bool {
	pu, err := url.Parse(u)
	if err != nil || pu.Scheme != "http" {
		return false
	}
	h := pu.Hostname()
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

func (s *SSO) discover(ctx context.Context) (*oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.provider, nil
	}
	p, err := oidc.NewProvider(ctx, s.c.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovering the OpenID provider %s: %w", s.c.Issuer, err)
	}
	s.provider = p
	return p, nil
}

// oauth is the web client's: it asks offline_access too (unless
// NoOfflineAccess), for the refresh token that keeps a session's ID
// token fresh (refresh).
func (s *SSO) oauth(p *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: s.c.ClientID, ClientSecret: s.c.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.c.RedirectURL, Scopes: s.scopes()}
}

// scopes are what the web client and the CLI ask the provider: Scopes
// (else SSOScopes), and offline_access first unless NoOfflineAccess.
func (s *SSO) scopes() []string {
	asked := s.asked()
	if s.c.NoOfflineAccess {
		return asked
	}
	return append([]string{oidc.ScopeOfflineAccess}, asked...)
}

// asked are the scopes asked besides offline_access: Scopes, else
// SSOScopes.
func (s *SSO) asked() []string {
	if len(s.c.Scopes) > 0 {
		return slices.Clone(s.c.Scopes)
	}
	return slices.Clone(SSOScopes)
}

// Register adds the SSO's routes to mux. They need no identity: login
// and callback make one, logout ends it, config is public.
func (s *SSO) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+SSOLoginPath, s.login)
	mux.HandleFunc("GET "+SSOCallbackPath, s.callback)
	mux.HandleFunc("POST "+SSOLogoutPath, s.logout)
	mux.HandleFunc("GET "+SSOConfigPath, s.config)
}

// SSOClientConfig is GET /auth/config: what the CLI logs in with.
type SSOClientConfig struct {
	Issuer   string   `json:"issuer"`
	ClientID string   `json:"clientID"` // the CLI's
	Scopes   []string `json:"scopes"`
	// UsernameClaim is server.sso.usernameClaim: the CLI names the person
	// it logged in as flotilla will (identity.OfClaims).
	UsernameClaim string `json:"usernameClaim,omitempty"`
}

func (s *SSO) config(w http.ResponseWriter, _ *http.Request) {
	if s.c.CLIClientID == "" {
		writeError(w, fault.New(fault.ErrNotFound, "this flotilla has no CLI client for single sign-on: set server.sso.cliClientID"))
		return
	}
	writeJSON(w, http.StatusOK, SSOClientConfig{Issuer: s.c.Issuer, ClientID: s.c.CLIClientID, Scopes: s.scopes(), UsernameClaim: s.c.UsernameClaim})
}

// ssoFlow is what the flow cookie carries.
type ssoFlow struct {
	State    string    `json:"s"`
	Nonce    string    `json:"n"`
	Verifier string    `json:"v"`
	Next     string    `json:"x"`
	Expires  time.Time `json:"e"`
}

func ssoRandom() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *SSO) sign(payload string) string {
	m := hmac.New(sha256.New, s.flowKey)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// login sends the browser to the provider.
func (s *SSO) login(w http.ResponseWriter, r *http.Request) {
	p, err := s.discover(r.Context())
	if err != nil {
		s.log.WarnContext(r.Context(), "single sign-on unavailable", "error", err)
		s.fail(w, http.StatusBadGateway, "The identity provider cannot be reached; try again, or log in with an API token.")
		return
	}
	f := ssoFlow{State: ssoRandom(), Nonce: ssoRandom(), Verifier: oauth2.GenerateVerifier(),
		Next: safeUINext(r.URL.Query().Get("next")), Expires: s.now().Add(ssoFlowTTL)}
	raw, _ := json.Marshal(f)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	http.SetCookie(w, &http.Cookie{Name: ssoFlowCookie, Value: payload + "." + s.sign(payload), Path: "/auth/",
		MaxAge: int(ssoFlowTTL / time.Second), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, s.oauth(p).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), oidc.Nonce(f.Nonce)), http.StatusFound)
}

// flow reads and checks the flow cookie.
func (s *SSO) flow(r *http.Request) (ssoFlow, error) {
	c, err := r.Cookie(ssoFlowCookie)
	if err != nil {
		return ssoFlow{}, errors.New("no login under way in this browser (or it took over ten minutes)")
	}
	payload, mac, _ := strings.Cut(c.Value, ".")
	if !hmac.Equal([]byte(mac), []byte(s.sign(payload))) {
		return ssoFlow{}, errors.New("the login's cookie is not flotilla's")
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	var f ssoFlow
	if err == nil {
		err = json.Unmarshal(raw, &f)
	}
	if err != nil || s.now().After(f.Expires) {
		return ssoFlow{}, errors.New("the login took over ten minutes")
	}
	return f, nil
}

// callback finishes the code flow: the state and the PKCE verifier of the
// flow cookie, the ID token verified (issuer, audience, expiry, signature
// by the provider's JWKS, nonce), and a session.
func (s *SSO) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ok := false
	defer func() {
		if s.logins != nil {
			s.logins(loginSSO, ok)
		}
	}()
	http.SetCookie(w, &http.Cookie{Name: ssoFlowCookie, Path: "/auth/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	f, err := s.flow(r)
	q := r.URL.Query()
	switch {
	case err != nil:
	case subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1:
		err = errors.New("the login's state does not match this browser's")
	case q.Get("error") == "invalid_scope" && !s.c.NoOfflineAccess:
		err = fmt.Errorf("the identity provider refused: %s %s (if it does not grant %s, set server.sso.offlineAccess: false; "+
			"if it does not grant one of %s, leave it out of server.sso.scopes)",
			q.Get("error"), q.Get("error_description"), oidc.ScopeOfflineAccess, strings.Join(s.asked(), ", "))
	case q.Get("error") == "invalid_scope":
		err = fmt.Errorf("the identity provider refused: %s %s (if it does not grant one of %s, leave it out of server.sso.scopes)",
			q.Get("error"), q.Get("error_description"), strings.Join(s.asked(), ", "))
	case q.Get("error") != "":
		err = fmt.Errorf("the identity provider refused: %s %s", q.Get("error"), q.Get("error_description"))
	}
	if err != nil {
		s.log.InfoContext(ctx, "single sign-on refused", "remote", r.RemoteAddr, "error", err)
		s.fail(w, http.StatusUnauthorized, "Login failed: "+err.Error())
		return
	}
	p, err := s.discover(ctx)
	if err != nil {
		s.fail(w, http.StatusBadGateway, "The identity provider cannot be reached; try again.")
		return
	}
	tok, err := s.oauth(p).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		s.log.InfoContext(ctx, "single sign-on code exchange failed", "error", err)
		s.fail(w, http.StatusUnauthorized, "Login failed: the identity provider did not accept the login's code.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	principal, idt, err := s.verify(ctx, p, s.c.ClientID, raw)
	if err == nil && subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(f.Nonce)) != 1 {
		err = errors.New("the ID token's nonce is not this login's")
	}
	if err != nil {
		s.log.InfoContext(ctx, "single sign-on ID token refused", "error", err)
		s.fail(w, http.StatusUnauthorized, "Login failed: "+err.Error())
		return
	}
	id := ssoRandom()
	now := s.now()
	doc := ssoSession{Subject: principal.Subject, Name: principal.Name, Username: principal.Username, Groups: principal.Groups,
		CreatedAt: now, ExpiresAt: now.Add(s.c.SessionTTL)}
	if tok.RefreshToken == "" && idt.Expiry.Before(doc.ExpiresAt) {
		// Nothing to ask the provider again with: the session ends with
		// its ID token, so that who the person is (their groups, their
		// account still enabled) is never older than the provider allows.
		doc.ExpiresAt = idt.Expiry
	}
	if tok.RefreshToken != "" {
		sealed, err := sealRefresh(id, tok.RefreshToken)
		if err != nil {
			s.log.ErrorContext(ctx, "sealing a single sign-on refresh token", "error", err)
			s.fail(w, http.StatusServiceUnavailable, "The session could not be kept; try again.")
			return
		}
		doc.IDTokenExpiry, doc.Refresh = idt.Expiry, sealed
	}
	if err := s.sessions.Put(ctx, SSOSessionCollection, ssoSessionKey(id), doc); err != nil {
		s.log.ErrorContext(ctx, "keeping a single sign-on session", "error", err)
		s.fail(w, http.StatusServiceUnavailable, "The session could not be kept; try again.")
		return
	}
	s.log.InfoContext(ctx, "web UI login", "name", principal.Name, "groups", principal.Groups, "via", "sso", "remote", r.RemoteAddr)
	ok = true
	// The cookie lasts sessionTTL even when the session ends sooner with
	// its ID token: the state says it ended, and the 401 says so.
	http.SetCookie(w, &http.Cookie{Name: SSOSessionCookie, Value: id, Path: "/", MaxAge: int(s.c.SessionTTL / time.Second),
		Expires: now.Add(s.c.SessionTTL).UTC(), HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
}

// logout ends the session (in the state port: every replica sees it
// ended) and drops the cookies of both kinds of session.
func (s *SSO) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		s.fail(w, http.StatusForbidden, "A logout from another site is refused.")
		return
	}
	if c, err := r.Cookie(SSOSessionCookie); err == nil && c.Value != "" {
		key := ssoSessionKey(c.Value)
		var doc ssoSession
		if found, err := s.sessions.Get(r.Context(), SSOSessionCollection, key, &doc); err == nil && found && doc.EndedAt == nil {
			now := s.now()
			doc.EndedAt = &now
			if err := s.sessions.Put(r.Context(), SSOSessionCollection, key, doc); err != nil {
				s.log.ErrorContext(r.Context(), "ending a single sign-on session", "error", err)
				s.fail(w, http.StatusServiceUnavailable, "The session could not be ended; try again.")
				return
			}
			s.log.InfoContext(r.Context(), "web UI logout", "name", doc.Name, "via", "sso")
		}
	}
	if c, err := r.Cookie(SessionCookie); err == nil && s.endSession != nil {
		if err := s.endSession(r.Context(), c.Value); err != nil {
			s.log.ErrorContext(r.Context(), "ending a web session", "error", err)
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SSOSessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

func (s *SSO) fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = fmt.Fprintln(w, msg, "\nBack to the login page: /ui/login")
}

// sessionKey is a session's document key: the SHA-256 of its id.
func ssoSessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// verify checks raw, an ID token of the provider for the client
// clientID, and makes its principal from its claims (identity.OfClaims:
// the names and groups server.sso's claims give).
func (s *SSO) verify(ctx context.Context, p *oidc.Provider, clientID, raw string) (identity.Principal, *oidc.IDToken, error) {
	if raw == "" {
		return identity.Principal{}, nil, errors.New("the identity provider returned no ID token")
	}
	idt, err := p.Verifier(&oidc.Config{ClientID: clientID, Now: s.now}).Verify(ctx, raw)
	if err != nil {
		return identity.Principal{}, nil, fmt.Errorf("verifying the ID token: %w", err)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return identity.Principal{}, nil, fmt.Errorf("reading the ID token's claims: %w", err)
	}
	return identity.OfClaims(idt.Subject, claims, identity.ClaimNames{Username: s.c.UsernameClaim, Groups: s.c.GroupsClaim}), idt, nil
}

// authenticate finds an SSO identity in r: an ID token of the CLI's
// client as a bearer token, or the web session's cookie. handled is false
// when r carries neither (the API tokens' turn).
func (s *SSO) authenticate(r *http.Request, reads bool) (_ identity.Principal, handled bool, reason string, _ error) {
	if scheme, raw, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		raw = strings.TrimSpace(raw)
		if !looksLikeJWT(raw) {
			return identity.Principal{}, false, "", nil
		}
		if s.c.CLIClientID == "" {
			return identity.Principal{}, true, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, msgNoCLIClient)
		}
		p, err := s.discover(r.Context())
		if err != nil {
			return identity.Principal{}, true, refusedUnauthenticated, fault.New(fault.ErrUpstream, "verifying the ID token: "+err.Error())
		}
		principal, _, err := s.verify(r.Context(), p, s.c.CLIClientID, raw)
		if err != nil {
			return identity.Principal{}, true, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, err.Error()+": log in again with flotilla login --sso")
		}
		principal.Via = identity.ViaToken
		return principal, true, "", nil
	}
	c, err := r.Cookie(SSOSessionCookie)
	if err != nil || c.Value == "" {
		return identity.Principal{}, false, "", nil
	}
	var doc ssoSession
	found, err := s.sessions.Get(r.Context(), SSOSessionCollection, ssoSessionKey(c.Value), &doc)
	if err != nil {
		return identity.Principal{}, true, refusedUnauthenticated, fmt.Errorf("reading the session: %w", err)
	}
	if !found || doc.EndedAt != nil || !s.now().Before(doc.ExpiresAt) {
		return identity.Principal{}, true, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, msgSSOSessionInvalid)
	}
	if !reads && r.Header.Get(CSRFHeader) != "1" {
		return identity.Principal{}, true, refusedCSRF, fault.New(fault.ErrForbidden, msgMissingCSRF)
	}
	if doc.Refresh != "" && !s.now().Before(doc.IDTokenExpiry) {
		if doc, err = s.refresh(r.Context(), c.Value); err != nil {
			return identity.Principal{}, true, refusedUnauthenticated, err
		}
	}
	return identity.Principal{Subject: doc.Subject, Name: doc.Name, Username: doc.Username, Groups: doc.Groups, Via: identity.ViaSession}, true, "", nil
}

// Results of a session's refresh, as
// flotilla_sso_session_refreshes_total counts them.
const (
	refreshSucceeded = "succeeded"
	refreshRefused   = "refused" // the provider refused: the session ended
	refreshFailed    = "failed"  // the provider unreachable or answering 5xx: the request refused, the session kept
)

// refresh gives the session of the cookie value id a new ID token from
// the provider with its refresh token, once its last one expired: the
// person's name and groups as the provider says now, the rotated refresh
// token kept. The provider refusing (invalid_grant: the person disabled,
// signed out everywhere, the token revoked or spent) ends the session
// (401, the login hint); the provider unreachable refuses this request
// (502) and keeps the session, to try again at the next. One refresh of a
// session at a time in this process; a refusal is checked against the
// state first, since another replica may have refreshed it (and spent
// the refresh token it rotated) meanwhile.
func (s *SSO) refresh(ctx context.Context, id string) (ssoSession, error) {
	key := ssoSessionKey(id)
	mu, _ := s.refreshing.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer func() {
		mu.(*sync.Mutex).Unlock()
		s.refreshing.Delete(key)
	}()
	var doc ssoSession
	found, err := s.sessions.Get(ctx, SSOSessionCollection, key, &doc)
	switch {
	case err != nil:
		return doc, fmt.Errorf("reading the session: %w", err)
	case !found || doc.EndedAt != nil || !s.now().Before(doc.ExpiresAt):
		return doc, fault.New(fault.ErrUnauthenticated, msgSSOSessionInvalid)
	case doc.Refresh == "" || s.now().Before(doc.IDTokenExpiry):
		return doc, nil // refreshed by the call this one waited for
	}
	fresh, err := s.refreshOnce(ctx, id, doc)
	if err == nil {
		s.countRefresh(refreshSucceeded)
		s.log.InfoContext(ctx, "single sign-on session refreshed", "name", fresh.Name, "groups", fresh.Groups)
		return fresh, nil
	}
	var re *oauth2.RetrieveError
	refused := errors.Is(err, errRefreshRefused) ||
		(errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500)
	if !refused {
		s.countRefresh(refreshFailed)
		s.log.WarnContext(ctx, "refreshing a single sign-on session", "name", doc.Name, "error", err)
		return doc, fault.New(fault.ErrUpstream, "refreshing the single sign-on session at the identity provider failed; try again")
	}
	// Refused. Another replica may have spent the token first: its
	// refresh is in the state, or about to be.
	for range 3 {
		var now ssoSession
		if found, gerr := s.sessions.Get(ctx, SSOSessionCollection, key, &now); gerr == nil && found && now.EndedAt == nil && now.Refresh != doc.Refresh {
			return now, nil
		}
		select {
		case <-ctx.Done():
			return doc, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	s.countRefresh(refreshRefused)
	s.log.InfoContext(ctx, "single sign-on session ended: the provider refused its refresh", "name", doc.Name, "error", err)
	ended := s.now()
	doc.EndedAt, doc.Refresh = &ended, ""
	if perr := s.sessions.Put(ctx, SSOSessionCollection, key, doc); perr != nil {
		s.log.ErrorContext(ctx, "ending a single sign-on session", "error", perr)
	}
	return doc, fault.New(fault.ErrUnauthenticated, msgSSORefreshRefused)
}

// errRefreshRefused: the provider answered the refresh, but with an ID
// token that is not this session's person's, or none usable.
var errRefreshRefused = errors.New("the identity provider's refresh is not this session's")

// refreshOnce asks the provider for a new ID token with doc's refresh
// token and keeps the session's new state.
func (s *SSO) refreshOnce(ctx context.Context, id string, doc ssoSession) (ssoSession, error) {
	rt, err := openRefresh(id, doc.Refresh)
	if err != nil {
		return doc, fmt.Errorf("%w: %w", errRefreshRefused, err)
	}
	p, err := s.discover(ctx)
	if err != nil {
		return doc, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Timeout: 10 * time.Second})
	tok, err := s.oauth(p).TokenSource(ctx, &oauth2.Token{RefreshToken: rt, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return doc, err
	}
	raw, _ := tok.Extra("id_token").(string)
	principal, idt, err := s.verify(ctx, p, s.c.ClientID, raw)
	if err != nil {
		return doc, fmt.Errorf("%w: %w", errRefreshRefused, err)
	}
	if principal.Subject != doc.Subject {
		return doc, fmt.Errorf("%w: its subject is %q, the session's %q", errRefreshRefused, principal.Subject, doc.Subject)
	}
	if tok.RefreshToken != "" && tok.RefreshToken != rt {
		if doc.Refresh, err = sealRefresh(id, tok.RefreshToken); err != nil {
			return doc, err
		}
	}
	now := s.now()
	doc.Name, doc.Username, doc.Groups, doc.IDTokenExpiry, doc.RefreshedAt = principal.Name, principal.Username, principal.Groups, idt.Expiry, &now
	if err := s.sessions.Put(ctx, SSOSessionCollection, ssoSessionKey(id), doc); err != nil {
		return doc, fmt.Errorf("keeping the refreshed session: %w", err)
	}
	return doc, nil
}

func (s *SSO) countRefresh(result string) {
	if s.refreshes != nil {
		s.refreshes(result)
	}
}

// refreshKey is the AES-256 key a session's refresh token is sealed with:
// derived from the session's id, which only its cookie holds (the state
// keys the session by another hash of it, ssoSessionKey).
func refreshKey(id string) []byte {
	sum := sha256.Sum256([]byte("flotilla-sso-refresh|" + id))
	return sum[:]
}

// sealRefresh seals a refresh token with AES-GCM under refreshKey(id).
func sealRefresh(id, token string) (string, error) {
	block, err := aes.NewCipher(refreshKey(id))
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(gcm.Seal(nonce, nonce, []byte(token), nil)), nil
}

// openRefresh opens what sealRefresh sealed.
func openRefresh(id, sealed string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return "", fmt.Errorf("decoding the sealed refresh token: %w", err)
	}
	block, err := aes.NewCipher(refreshKey(id))
	if err != nil {
		return "", err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return "", err
	}
	if len(raw) < gcm.NonceSize() {
		return "", errors.New("the sealed refresh token is too short")
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], nil)
	if err != nil {
		return "", errors.New("the sealed refresh token does not open with this session's key")
	}
	return string(plain), nil
}

// looksLikeJWT: three base64url parts, the first a JSON object's.
func looksLikeJWT(s string) bool {
	return strings.Count(s, ".") == 2 && strings.HasPrefix(s, "eyJ")
}

// safeUINext is where a login goes on to: a page of the UI, never
// another site.
func safeUINext(next string) string {
	const ui = "/ui/"
	u, err := url.Parse(next)
	if err != nil || !strings.HasPrefix(next, ui) || strings.HasPrefix(next, ui+"login") || u.Scheme != "" || u.Host != "" ||
		strings.ContainsAny(next, "\\\r\n\t") || strings.Contains(u.Path, "..") {
		return ui
	}
	return next
}

// SweepSessions deletes the sessions that expired or were ended (their
// cookies are refused alike without them), so that the state keeps only
// live sessions however many logins there were; it says how many it
// deleted.
func (s *SSO) SweepSessions(ctx context.Context) (int, error) {
	now := s.now()
	var gone []string
	err := s.sessions.List(ctx, SSOSessionCollection, func(key string, raw []byte) error {
		var doc ssoSession
		if err := json.Unmarshal(raw, &doc); err != nil || doc.EndedAt != nil || !now.Before(doc.ExpiresAt) {
			gone = append(gone, key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing the single sign-on sessions: %w", err)
	}
	for i, key := range gone {
		if err := s.sessions.Delete(ctx, SSOSessionCollection, key); err != nil {
			return i, fmt.Errorf("deleting an ended single sign-on session: %w", err)
		}
	}
	return len(gone), nil
}

// RunSweeper sweeps the sessions at start and every interval until ctx
// ends; a sweep that fails is logged and tried again at the next.
func (s *SSO) RunSweeper(ctx context.Context, every time.Duration) error {
	return RunSweeper(ctx, every, s.log, "single sign-on sessions", s.SweepSessions)
}
