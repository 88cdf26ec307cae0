package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

const (
	// SessionCookie is the web UI's session. A config token's is
	// "<token name>.<expiry, unix seconds>.<base64url HMAC-SHA256, keyed
	// by the token's secret, of "flotilla-session|<name>|<expiry>">". It
	// carries no secret and needs no state: any replica with the config
	// verifies it, and a token taken out of the config (or given a new
	// secret) ends its sessions. A created token's is "t:<opaque id>" of a
	// session kept in the state port (sessions.go).
	SessionCookie = "flotilla_session"
	// SessionTTL is how long a session lasts.
	SessionTTL = 12 * time.Hour
	// CSRFHeader must be sent, as "1", by a request authenticated by the
	// session cookie that changes something (OWASP's custom request
	// header): a cross-site form cannot set it, and a cross-site fetch
	// that does is refused by the browser (no CORS).
	CSRFHeader = "X-Flotilla-CSRF"
)

// Reasons a request is refused, as flotilla_api_requests_refused_total
// counts them.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedCSRF            = "csrf"
	refusedForbidden       = "forbidden" // the projects' roles (authz.go)
)

// Messages of the refusals (clients and tests match them).
const (
	msgNeedsToken     = "this call needs an API token: send Authorization: Bearer <token> (server.apiTokens), or set server.anonymousRead: true to open reads"
	msgControlNeeds   = "this call changes state and needs an API token: send Authorization: Bearer <token> (server.apiTokens)"
	msgNoTokens       = "this flotilla has no API token: set server.apiTokens (or server.apiToken) in its config, or server.anonymousRead: true to open reads"
	msgUnknownToken   = "unknown API token"
	msgSessionInvalid = "the session has expired or is no longer valid: log in again at /ui/login"
	msgMissingCSRF    = "missing " + CSRFHeader + " header"
)

// Authn authenticates the requests of the routes it guards: every API
// route and UI page (docs/design/identity.md, #31). In order: an API token
// in "Authorization: Bearer <token>", the web UI's session cookie, and
// else, where server.anonymousRead opens reads, anonymous for a GET or
// HEAD. What it finds is the request's identity.Principal, in its context.
type Authn struct {
	tokens        []namedToken
	sso           *SSO // single sign-on (sso.go); nil: none
	anonymousRead bool
	groups        map[string][]string // token name -> its groups
	now           func() time.Time
	register      prometheus.Registerer
	refused       *prometheus.CounterVec
	logins        *prometheus.CounterVec
	refreshes     *prometheus.CounterVec // single sign-on sessions' refreshes (sso.go)

	registry TokenRegistry  // created tokens, revocations (tokens.go)
	sessions SSOSessions    // created tokens' web sessions (sessions.go); nil: none
	failures *failureLimit  // failed bearer tokens per client address
	proxies  []netip.Prefix // whose X-Forwarded-For names the client

	// sharedFailures keeps the failures for every replica (failures.go).
	sharedFailures BearerFailures
}

// namedToken is one API token of the config, hashed at load: its SHA-256
// for the constant-time comparison (and hex, for its revocation), and the
// key its sessions are signed with, derived from the secret (sessionKey).
type namedToken struct {
	name   string
	key    []byte
	sum    [sha256.Size]byte
	sumHex string
}

// AuthnOption configures an Authn.
type AuthnOption func(*Authn)

// AnonymousRead opens the reads (GET and HEAD: the API's reads, the watch
// stream, the UI's pages) to requests without a credential when on
// (server.anonymousRead; default off). Controls still need a token.
func AnonymousRead(on bool) AuthnOption { return func(a *Authn) { a.anonymousRead = on } }

// TokenGroups gives the API tokens their groups (server.apiTokens[].groups;
// default none), which their principals carry.
func TokenGroups(groups map[string][]string) AuthnOption {
	return func(a *Authn) { a.groups = groups }
}

// WithClock sets the clock sessions are issued and checked by (default
// time.Now).
func WithClock(now func() time.Time) AuthnOption { return func(a *Authn) { a.now = now } }

// WithRegisterer registers flotilla_api_requests_refused_total in reg
// (default: nowhere).
func WithRegisterer(reg prometheus.Registerer) AuthnOption {
	return func(a *Authn) { a.register = reg }
}

// NewAuthn returns the authentication of the API tokens tokens (name ->
// secret; none refuses every guarded request, unless anonymousRead opens
// the reads).
func NewAuthn(tokens map[string]string, opts ...AuthnOption) (*Authn, error) {
	a := &Authn{now: time.Now, failures: newFailureLimit(DefaultBearerFailureBurst, DefaultBearerFailureEvery)}
	for _, o := range opts {
		o(a)
	}
	if a.failures != nil && a.sharedFailures != nil {
		a.failures.shared = a.sharedFailures
	}
	for _, name := range slices.Sorted(maps.Keys(tokens)) { // in order: two names of one secret, the first
		if secret := tokens[name]; secret != "" { // an empty secret would take "Bearer " alone
			sum := sha256.Sum256([]byte(secret))
			a.tokens = append(a.tokens, namedToken{name: name, key: sessionKey(secret), sum: sum, sumHex: hex.EncodeToString(sum[:])})
		}
	}
	a.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_api_requests_refused_total",
		Help: "Requests to the API and the web UI refused: reason unauthenticated (no, an unknown, a revoked or an expired credential; a wrong token at the UI's login), throttled (a bearer token from an address that sent too many failed ones: 429), csrf (a control of the UI's session without its X-Flotilla-CSRF header) or forbidden (a permission the principal's roles do not grant in the project).",
	}, []string{"reason"})
	a.logins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_web_logins_total",
		Help: "Logins to the web UI: method token (an API token at /ui/login, the config's or a created one) or sso (single sign-on's callback); result succeeded or failed (a wrong, revoked or expired token, a refused or failed sign-on).",
	}, []string{"method", "result"})
	a.refreshes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flotilla_sso_session_refreshes_total",
		Help: "Refreshes of single sign-on web sessions whose ID token expired, with the provider's refresh token: result succeeded (a new ID token: the person's name and groups as the provider says now), refused (the provider refused: the session ended, 401) or failed (the provider unreachable or failing: the request refused 502, the session kept).",
	}, []string{"result"})
	for _, r := range []string{refreshSucceeded, refreshRefused, refreshFailed} {
		a.refreshes.WithLabelValues(r)
	}
	for _, m := range []string{loginToken, loginSSO} {
		a.logins.WithLabelValues(m, "succeeded")
		a.logins.WithLabelValues(m, "failed")
	}
	a.refused.WithLabelValues(refusedUnauthenticated)
	a.refused.WithLabelValues(refusedCSRF)
	a.refused.WithLabelValues(refusedForbidden)
	a.refused.WithLabelValues(refusedThrottled)
	if a.register != nil {
		if err := a.register.Register(a.refused); err != nil {
			return nil, fmt.Errorf("registering flotilla_api_requests_refused_total: %w", err)
		}
		if err := a.register.Register(a.logins); err != nil {
			return nil, fmt.Errorf("registering flotilla_web_logins_total: %w", err)
		}
		if err := a.register.Register(a.refreshes); err != nil {
			return nil, fmt.Errorf("registering flotilla_sso_session_refreshes_total: %w", err)
		}
	}
	return a, nil
}

// Authenticate finds who r comes from. Its error is fault.ErrUnauthenticated
// (401: no credential where one is needed, an unknown token) or
// fault.ErrForbidden (403: a control of a UI session without CSRFHeader),
// and is counted.
func (a *Authn) Authenticate(r *http.Request) (identity.Principal, error) {
	p, reason, err := a.authenticate(r)
	if err != nil {
		a.refused.WithLabelValues(reason).Inc()
	}
	return p, err
}

func (a *Authn) authenticate(r *http.Request) (identity.Principal, string, error) {
	reads := r.Method == http.MethodGet || r.Method == http.MethodHead
	if a.sso != nil { // single sign-on's bearer ID tokens and sessions (sso.go)
		if p, handled, reason, err := a.sso.authenticate(r, reads); handled {
			return p, reason, err
		}
	}
	if len(a.tokens) == 0 && a.sessions == nil {
		if reads && a.anonymousRead {
			return identity.Anonymous, "", nil
		}
		return identity.Principal{}, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, a.orSSO(msgNoTokens))
	}
	if scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return a.bearer(r, strings.TrimSpace(secret)) // tokens.go
	}
	sessionErr := error(nil)
	if c, err := r.Cookie(SessionCookie); err == nil {
		p, err := a.cookieSession(r, c.Value)
		if err == nil {
			if !reads && r.Header.Get(CSRFHeader) != "1" {
				return identity.Principal{}, refusedCSRF, fault.New(fault.ErrForbidden, msgMissingCSRF)
			}
			return p, "", nil
		}
		sessionErr = err // ambient and stale: as if there were none
	}
	switch {
	case reads && a.anonymousRead:
		return identity.Anonymous, "", nil
	case sessionErr != nil:
		return identity.Principal{}, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, msgSessionInvalid)
	case !reads:
		return identity.Principal{}, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, a.orSSO(msgControlNeeds))
	default:
		return identity.Principal{}, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, a.orSSO(msgNeedsToken))
	}
}

// orSSO adds to a 401's message, with single sign-on on, how a person
// logs in through the provider instead of with an API token.
func (a *Authn) orSSO(msg string) string {
	if a.sso == nil {
		return msg
	}
	return msg + "; or log in through single sign-on: flotilla login --sso, or /auth/login in a browser"
}

// named is the config token name.
func (a *Authn) named(name string) namedToken {
	for _, t := range a.tokens {
		if t.name == name {
			return t
		}
	}
	return namedToken{}
}

// Forbidden counts the requests the projects' roles refuse
// (flotilla_api_requests_refused_total{reason="forbidden"}).
func (a *Authn) Forbidden() prometheus.Counter { return a.refused.WithLabelValues(refusedForbidden) }

// principal is the principal of the API token name, with its groups.
func (a *Authn) principal(name string, via identity.Via) identity.Principal {
	p := identity.OfToken(name, via)
	p.Groups = slices.Clone(a.groups[name])
	return p
}

// token returns the name of the API token whose secret is secret, every
// token compared in constant time.
func (a *Authn) token(secret string) (string, bool) {
	got := sha256.Sum256([]byte(secret))
	name := ""
	for _, t := range a.tokens {
		if subtle.ConstantTimeCompare(got[:], t.sum[:]) == 1 && name == "" {
			name = t.name
		}
	}
	return name, name != ""
}

// Require lets through to next only the requests Authenticate finds a
// principal for, with the principal in their context; it answers the
// others itself: 401 with WWW-Authenticate or 403, and {"error": "..."}.
func (a *Authn) Require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			if errors.Is(err, fault.ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla"`)
			}
			setRetryAfter(w, err)
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(identity.WithPrincipal(r.Context(), p)))
	})
}

// Login opens a session of the API token whose secret is secret, a
// config token or a created one (sessions.go): the cookie to set (Secure
// when secure: the request came over TLS). A secret of no token, or of a
// revoked or expired one, is fault.ErrUnauthenticated, counted.
func (a *Authn) Login(ctx context.Context, secret string, secure bool) (c *http.Cookie, p identity.Principal, err error) {
	defer func() { a.countLogin(loginToken, err == nil) }()
	if len(a.tokens) == 0 && a.sessions == nil {
		a.refused.WithLabelValues(refusedUnauthenticated).Inc()
		return nil, identity.Principal{}, fault.New(fault.ErrUnauthenticated, "this flotilla has no API token to log in with: set server.apiTokens in its config")
	}
	secret = strings.TrimSpace(secret)
	name, ok := a.token(secret)
	if !ok {
		return a.loginCreatedToken(ctx, secret, secure)
	}
	if a.revokedSession(a.named(name)) {
		a.refused.WithLabelValues(refusedUnauthenticated).Inc()
		return nil, identity.Principal{}, fault.New(fault.ErrUnauthenticated, "API token "+name+" is revoked")
	}
	now := a.now()
	expiry := now.Add(SessionTTL)
	value := name + "." + strconv.FormatInt(expiry.Unix(), 10) + "." + sessionMAC(a.named(name).key, name, expiry.Unix())
	return loginCookie(value, expiry, now, secure), a.principal(name, identity.ViaSession), nil
}

// loginCreatedToken opens a stored session of the created token whose
// secret is secret.
func (a *Authn) loginCreatedToken(ctx context.Context, secret string, secure bool) (*http.Cookie, identity.Principal, error) {
	why := msgUnknownToken
	if a.registry != nil {
		if t, found := a.registry.Lookup(secret); found {
			if why = t.Valid(a.now()); why == "" {
				value, expiry, err := a.loginCreated(ctx, t)
				if err != nil {
					return nil, identity.Principal{}, err
				}
				p := identity.OfToken(t.Name, identity.ViaSession)
				p.Automation = t.Automation
				return loginCookie(value, expiry, a.now(), secure), p, nil
			}
			why = "API token " + t.Name + " is " + why
		}
	}
	a.refused.WithLabelValues(refusedUnauthenticated).Inc()
	return nil, identity.Principal{}, fault.New(fault.ErrUnauthenticated, why)
}

// Methods of login, as flotilla_web_logins_total counts them.
const (
	loginToken = "token"
	loginSSO   = "sso"
)

// countLogin counts a login by method.
func (a *Authn) countLogin(method string, ok bool) {
	result := "failed"
	if ok {
		result = "succeeded"
	}
	a.logins.WithLabelValues(method, result).Inc()
}

// loginCookie is a session's cookie, until expiry.
func loginCookie(value string, expiry, now time.Time, secure bool) *http.Cookie {
	c := sessionCookie(value, secure)
	c.MaxAge = int((expiry.Sub(now) + time.Second/2) / time.Second)
	c.Expires = expiry.UTC().Truncate(time.Second)
	return c
}

// Logout ends r's session (a created token's, kept in the state port,
// ends on every replica) and is the cookie that drops it from the browser.
func (a *Authn) Logout(r *http.Request) (*http.Cookie, error) {
	c := sessionCookie("", r.TLS != nil)
	c.MaxAge = -1
	var err error
	if old, cerr := r.Cookie(SessionCookie); cerr == nil {
		err = a.EndSession(r.Context(), old.Value)
	}
	return c, err
}

// cookieSession authenticates a session cookie's value: a created token's
// stored session, or a config token's signed one.
func (a *Authn) cookieSession(r *http.Request, value string) (identity.Principal, error) {
	if strings.HasPrefix(value, tokenSessionPrefix) {
		return a.storedSession(r.Context(), value)
	}
	name, err := a.session(value)
	if err != nil {
		return identity.Principal{}, err
	}
	return a.principal(name, identity.ViaSession), nil
}

func sessionCookie(value string, secure bool) *http.Cookie {
	return &http.Cookie{Name: SessionCookie, Value: value, Path: "/", HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode}
}

// session verifies a session cookie's value and returns its token's name.
func (a *Authn) session(value string) (string, error) {
	// From the right: the expiry and the MAC hold no dot, a name might.
	rest, mac, ok := cutLast(value, ".")
	name, exp, ok2 := cutLast(rest, ".")
	if !ok || !ok2 || name == "" {
		return "", errors.New("malformed session")
	}
	expiry, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return "", errors.New("malformed session expiry")
	}
	if a.now().Unix() >= expiry {
		return "", errors.New("session expired")
	}
	for _, t := range a.tokens {
		if t.name == name {
			if !hmac.Equal([]byte(mac), []byte(sessionMAC(t.key, name, expiry))) {
				return "", errors.New("session not signed by its token")
			}
			if a.revokedSession(t) {
				return "", errors.New("session of a revoked token")
			}
			return name, nil
		}
	}
	return "", errors.New("session of a token no longer configured")
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// sessionMAC signs a session of the token name, with the key derived from
// its secret (sessionKey).
func sessionMAC(key []byte, name string, expiry int64) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("flotilla-session|" + name + "|" + strconv.FormatInt(expiry, 10)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
