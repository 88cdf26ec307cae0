package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// Runtime API tokens (#31 item 4, pkg/tokens): the bearer check of the
// created tokens and the config's revoked ones, the limit on failed
// bearer tokens per client address, and the routes that create, list and
// revoke tokens.

// TokenRegistry is the created tokens and the config tokens' revocations
// (pkg/tokens.Registry), read from its cache.
type TokenRegistry interface {
	Lookup(secret string) (tokens.Token, bool)
	RevokedConfig(name, sum string) bool
	List() []tokens.Token
	Create(ctx context.Context, spec tokens.Spec, taken bool) (string, tokens.Token, error)
	Revoke(ctx context.Context, name, by, configSum string) (tokens.Token, error)
}

// Defaults of the limit on failed bearer tokens: a client address may
// send DefaultBearerFailureBurst unknown, revoked or expired tokens at
// once, then one every DefaultBearerFailureEvery (OWASP ASVS 2.2.1);
// beyond it every request with a bearer token is 429 with Retry-After.
const (
	DefaultBearerFailureBurst = 10
	DefaultBearerFailureEvery = 6 * time.Second
	// maxLimitedAddrs bounds the addresses remembered: beyond it, those
	// whose failures are forgotten anyway go.
	maxLimitedAddrs = 10_000
)

const refusedThrottled = "throttled" // flotilla_api_requests_refused_total

const msgThrottled = "too many unknown, revoked or expired API tokens from this address: retry after the time in Retry-After"

// WithTokens has the bearer check also accept the created tokens of reg,
// and refuse the config's tokens reg revoked.
func WithTokens(reg TokenRegistry) AuthnOption { return func(a *Authn) { a.registry = reg } }

// BearerFailureLimit sets the limit on failed bearer tokens per client
// address (burst at once, then one every every; default
// DefaultBearerFailureBurst, DefaultBearerFailureEvery).
func BearerFailureLimit(burst int, every time.Duration) AuthnOption {
	return func(a *Authn) { a.failures = newFailureLimit(burst, every) }
}

// AuthnTrustedProxies names the proxies (server.trustedProxies) whose
// X-Forwarded-For names the client the limit on failed tokens counts.
func AuthnTrustedProxies(p ...netip.Prefix) AuthnOption {
	return func(a *Authn) { a.proxies = p }
}

// bearer authenticates a bearer token: a config token not revoked, else a
// created token neither revoked nor expired. Refusals count against the
// client's address, which is refused 429 beyond the limit.
func (a *Authn) bearer(r *http.Request, secret string) (identity.Principal, string, error) {
	addr := clientAddr(r, a.proxies)
	if wait, blocked := a.failures.blocked(addr); blocked {
		return identity.Principal{}, refusedThrottled, retryAfter{fault.New(fault.ErrAuthRateLimited, msgThrottled), wait}
	}
	why := msgUnknownToken
	if name, found := a.token(secret); found {
		if a.registry == nil || !a.registry.RevokedConfig(name, tokens.Sum(secret)) {
			return a.principal(name, identity.ViaToken), "", nil
		}
		why = "API token " + name + " is revoked"
	} else if a.registry != nil {
		if t, ok := a.registry.Lookup(secret); ok {
			if why = t.Valid(a.now()); why == "" {
				p := identity.OfToken(t.Name, identity.ViaToken)
				p.Automation = t.Automation
				return p, "", nil
			}
			why = "API token " + t.Name + " is " + why
		}
	}
	a.failures.failed(r.Context(), addr)
	return identity.Principal{}, refusedUnauthenticated, fault.New(fault.ErrUnauthenticated, why)
}

// revokedSession says whether the session of the config token t was
// revoked (it ends with its token).
func (a *Authn) revokedSession(t namedToken) bool {
	return a.registry != nil && a.registry.RevokedConfig(t.name, t.sumHex)
}

// sessionKey is what a config token's sessions are signed with, derived
// from its secret at load: the secret itself is not kept.
func sessionKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("flotilla-session-key"))
	return m.Sum(nil)
}

// retryAfter is a refusal a client may retry after wait.
type retryAfter struct {
	error
	wait time.Duration
}

func (e retryAfter) Unwrap() error { return e.error }

// setRetryAfter sets Retry-After when err says when to retry.
func setRetryAfter(w http.ResponseWriter, err error) {
	var ra retryAfter
	if errors.As(err, &ra) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int((ra.wait+time.Second-1)/time.Second))))
	}
}

// failureLimit is a token bucket of failures per client address: this
// replica's, and with shared (SharedBearerFailures) every replica's.
type failureLimit struct {
	burst int
	every time.Duration
	mu    sync.Mutex
	addrs map[string]*rate.Limiter

	shared BearerFailures        // nil: this replica's limit only
	remote map[string]failureDoc // the shared buckets, as written or watched
	now    func() time.Time
}

func newFailureLimit(burst int, every time.Duration) *failureLimit {
	return &failureLimit{burst: max(1, burst), every: every, addrs: map[string]*rate.Limiter{}, remote: map[string]failureDoc{}, now: time.Now}
}

// blocked says whether addr used up its failures, and for how long.
func (f *failureLimit) blocked(addr string) (time.Duration, bool) {
	if f == nil {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.addrs[addr]; ok {
		if t := l.Tokens(); t < 1 {
			return time.Duration((1 - t) * float64(f.every)), true
		}
	}
	if d, ok := f.remote[addr]; ok {
		if t := f.level(d); t < 1 {
			return time.Duration((1 - t) * float64(f.every)), true
		}
	}
	return 0, false
}

// failed counts a failure of addr, here and, when shared, for every
// replica.
func (f *failureLimit) failed(ctx context.Context, addr string) {
	if f == nil {
		return
	}
	f.failedHere(addr)
	if f.shared != nil {
		f.failedShared(ctx, addr)
	}
}

// failedHere counts a failure of addr in this replica's bucket.
func (f *failureLimit) failedHere(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.addrs[addr]
	if !ok {
		if len(f.addrs) >= maxLimitedAddrs {
			for k, old := range f.addrs {
				if old.Tokens() >= float64(f.burst) {
					delete(f.addrs, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(f.every), f.burst)
		f.addrs[addr] = l
	}
	l.Allow()
}

// TokenRequest is the body of POST /api/v1/tokens.
type TokenRequest struct {
	Name    string `json:"name"`
	Project string `json:"project"`
	Role    string `json:"role"`
	// Expires is how long the token lasts: a duration ("720h") or days
	// ("30d"); "" or "never": no expiry.
	Expires string `json:"expires,omitempty"`
	// Automation marks a token a machine uses: its approvals never count.
	Automation bool   `json:"automation,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// TokenCreated answers POST /api/v1/tokens: the token, and its secret,
// never shown again.
type TokenCreated struct {
	Token  TokenInfo `json:"token"`
	Secret string    `json:"secret"`
}

// TokenGrant is a role granted in a project (pkg/tokens.Grant).
type TokenGrant = tokens.Grant

// TokenInfo is a token as the API shows it: no secret, no hash.
type TokenInfo struct {
	Name      string       `json:"name"`
	Grants    []TokenGrant `json:"grants,omitempty"`
	Config    bool         `json:"config,omitempty"`
	CreatedBy string       `json:"createdBy,omitempty"`
	CreatedAt time.Time    `json:"createdAt"`
	ExpiresAt *time.Time   `json:"expiresAt,omitempty"`
	RevokedAt *time.Time   `json:"revokedAt,omitempty"`
	RevokedBy string       `json:"revokedBy,omitempty"`
	// Automation: a machine's token, whose approvals never count.
	Automation bool `json:"automation,omitempty"`
}

func infoOf(t tokens.Token) TokenInfo {
	return TokenInfo{Name: t.Name, Grants: t.Grants, Config: t.Config, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt,
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt, RevokedBy: t.RevokedBy, Automation: t.Automation}
}

// WithTokenAdmin serves the token routes from reg; configSums are the
// config tokens' SHA-256 (hex) by name: their names are taken, and they
// are revoked by theirs.
func (a *API) WithTokenAdmin(reg TokenRegistry, configSums map[string]string) *API {
	a.tokens, a.configSums = reg, configSums
	return a
}

// parseExpiry reads a token's lifetime: "30d", a Go duration, "" or
// "never".
func parseExpiry(s string) (time.Duration, error) {
	switch {
	case s == "" || s == "never":
		return 0, nil
	case strings.HasSuffix(s, "d"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "d"))
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("expires %q: want a number of days (30d) or a duration (720h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("expires %q: want a number of days (30d) or a duration (720h)", s)
	}
	return d, nil
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request) {
	var req TokenRequest
	by, ok := a.authorizedRequest(w, r, &req)
	if !ok || !a.tokenAdmin(w) {
		return
	}
	az := a.authz
	if az == nil {
		az = authz.Open()
	}
	life, err := parseExpiry(req.Expires)
	if err == nil && (req.Project == "" || req.Role == "") {
		err = errors.New("a token needs a project (or * for every project) and a role")
	}
	if err == nil {
		if _, why := az.RoleOf(req.Project, req.Role); why != "" {
			err = errors.New(why)
		}
	}
	if err == nil {
		if why := tokens.ValidName(req.Name); why != "" {
			err = errors.New(why)
		}
	}
	if err != nil {
		writeError(w, fault.Permanent(err))
		return
	}
	var expires *time.Time
	if life > 0 {
		at := time.Now().Add(life).UTC().Truncate(time.Second)
		expires = &at
	}
	_, taken := a.configSums[req.Name]
	if _, exists := a.find(req.Name); taken || exists { // a conflict is no decision: not audited
		writeError(w, fmt.Errorf("%w: %s", tokens.ErrExists, req.Name))
		return
	}
	detail := fmt.Sprintf("create %s: role %s in project %s, expires %s", req.Name, req.Role, req.Project, expiryText(expires))
	if req.Automation {
		detail += ", automation"
	}
	if !a.audit(w, r, a.auditOf(r, string(identity.ManageTokens), events.AuditRecorded{Detail: detail, Reason: req.Reason})) {
		return
	}
	secret, t, err := a.tokens.Create(r.Context(), tokens.Spec{Name: req.Name, Grants: []tokens.Grant{{Project: req.Project, Role: req.Role}}, By: by,
		Expires: expires, Automation: req.Automation}, taken)
	if err != nil {
		writeError(w, err)
		return
	}
	a.log.InfoContext(r.Context(), "token created", "token", t.Name, "by", by, "project", req.Project, "role", req.Role)
	writeJSON(w, http.StatusCreated, TokenCreated{Token: infoOf(t), Secret: secret})
}

func expiryText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Format(time.RFC3339)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request) {
	if !a.tokenAdmin(w) {
		return
	}
	out := []TokenInfo{}
	for _, t := range a.tokens.List() {
		out = append(out, infoOf(t))
	}
	writeJSON(w, http.StatusOK, map[string][]TokenInfo{"tokens": out})
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request) {
	var req ControlRequest
	by, ok := a.authorizedRequest(w, r, &req)
	if !ok || !a.tokenAdmin(w) {
		return
	}
	name := r.PathValue("name")
	sum := a.configSums[name]
	if sum == "" {
		if t, found := a.find(name); !found || t.Config {
			writeError(w, fault.New(fault.ErrNotFound, fmt.Sprintf("no token %q", name)))
			return
		}
	}
	if !a.audit(w, r, a.auditOf(r, string(identity.ManageTokens), events.AuditRecorded{Detail: "revoke " + name, Reason: req.Reason})) {
		return
	}
	t, err := a.tokens.Revoke(r.Context(), name, by, sum)
	if err != nil {
		writeError(w, err)
		return
	}
	a.log.InfoContext(r.Context(), "token revoked", "token", name, "by", by)
	writeJSON(w, http.StatusOK, infoOf(t))
}

func (a *API) find(name string) (tokens.Token, bool) {
	for _, t := range a.tokens.List() {
		if t.Name == name {
			return t, true
		}
	}
	return tokens.Token{}, false
}

// tokenAdmin answers 404 when this API keeps no tokens.
func (a *API) tokenAdmin(w http.ResponseWriter) bool {
	if a.tokens == nil {
		writeError(w, fault.New(fault.ErrNotFound, "this flotilla keeps no API tokens"))
		return false
	}
	return true
}
