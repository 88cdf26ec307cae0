package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults of server.sso.
const (
	DefaultGroupsClaim   = "groups"
	DefaultUsernameClaim = "preferred_username"
	DefaultSessionTTL    = 12 * time.Hour
	// MaxSessionTTL bounds server.sso.sessionTTL: a session outliving a
	// week would outlive most providers' own sessions and a person's
	// leaving (OWASP ASVS 3.3).
	MaxSessionTTL = 7 * 24 * time.Hour
	// SSOCallbackPath is where the provider sends the browser back to,
	// under server.externalURL (the web client's redirect URL).
	SSOCallbackPath = "/auth/callback"
	// DefaultSessionSweepInterval is server.sessionSweepInterval's default.
	DefaultSessionSweepInterval = 10 * time.Minute
	// ScopeOpenID is the scope every OpenID Connect request asks;
	// ScopeOfflineAccess the one server.sso.offlineAccess asks.
	ScopeOpenID        = "openid"
	ScopeOfflineAccess = "offline_access"
)

// DefaultSSOScopes are server.sso.scopes' default, as Argo CD's
// requestedScopes.
var DefaultSSOScopes = []string{ScopeOpenID, "email", "profile", "groups"}

// SessionSweep is how often the ended and expired web sessions are
// deleted: server.sessionSweepInterval, or its default.
func (s Server) SessionSweep() time.Duration {
	if s.SessionSweepInterval.Duration == 0 {
		return DefaultSessionSweepInterval
	}
	return s.SessionSweepInterval.Duration
}

// sessionSweep checks server.sessionSweepInterval.
func (v *validator) sessionSweep(s *Server) {
	if d := s.SessionSweepInterval.Duration; d != 0 && (d < time.Second || d > 24*time.Hour) {
		v.addf("server.sessionSweepInterval", "%s is out of range: want 1s to 24h", d)
	}
}

// SSO is single sign-on through an OpenID Connect provider
// (docs/design/identity.md, "Single sign-on"): the web UI logs in with the
// authorization code flow and PKCE, the CLI (`flotilla login --sso`) with
// the device authorization grant, or with --browser the code flow on a
// loopback redirect. The provider's client of the web UI
// must allow the redirect URL server.externalURL + "/auth/callback".
type SSO struct {
	// Issuer is the provider's issuer URL (its discovery document is
	// Issuer + "/.well-known/openid-configuration"). Required.
	Issuer string `json:"issuer"`
	// ClientID is the web UI's client at the provider (a confidential
	// client: code flow). Required.
	ClientID string `json:"clientID"`
	// ClientSecret is that client's secret. Required.
	ClientSecret *Secret `json:"clientSecret"`
	// ClientSecretValue is the resolved ClientSecret, set by Load. Never
	// marshalled.
	ClientSecretValue string `json:"-"`
	// CLIClientID is the CLI's client at the provider (a public client
	// allowed the device grant and refresh tokens, and for `login --sso
	// --browser` the code grant with a redirect to
	// http://127.0.0.1:<port>/auth/callback): the audience of the
	// ID tokens the CLI sends as bearer tokens. Empty: the CLI cannot log
	// in with SSO, and bearer ID tokens are refused.
	CLIClientID string `json:"cliClientID"`
	// GroupsClaim is the ID token's claim holding the person's groups
	// (a list of strings), which the projects' roles grant to as
	// "group:<name>". Default "groups".
	GroupsClaim string `json:"groupsClaim"`
	// UsernameClaim is the ID token's claim holding the person's login
	// name at the provider (Kargo's api.oidc.usernameClaim): a name they
	// are known by besides their email and subject, which a role or
	// approvals.from grants to as "user:<name>", and which separation of
	// duties compares with the pusher a registry's or git host's webhook
	// names (Keycloak's, Okta's and Google's subjects are opaque, and an
	// email is not a login). Name a claim people cannot set themselves:
	// preferred_username at Keycloak (unless the realm lets users edit
	// their username), Okta and Dex (Azure's is the UPN), else upn,
	// login, nickname, ... A token without it gives no username. Default
	// "preferred_username".
	UsernameClaim string `json:"usernameClaim"`
	// SessionTTL is how long a web UI session lasts after its login,
	// 1m to 168h. Default 12h.
	SessionTTL Duration `json:"sessionTTL"`
	// OfflineAccess has the web UI and the CLI ask the provider for the
	// offline_access scope, a refresh token, with which a web session
	// whose ID token expired is refreshed (the person's groups as the
	// provider says now) and the CLI renews its login. false, for a
	// provider that refuses the scope (Google answers invalid_scope):
	// neither asks it, and a web session ends when its ID token expires
	// (401 and the login hint: the person logs in again), as does the
	// CLI's login. Default true.
	OfflineAccess *bool `json:"offlineAccess"`
	// Scopes are the scopes the web UI and the CLI ask the provider,
	// besides offline_access (OfflineAccess), as Argo CD's
	// requestedScopes: the list replaces the default [openid, email,
	// profile, groups]. openid is required. Leave out one the provider
	// refuses (Google answers invalid_scope to groups: [openid, email,
	// profile]); add one it needs to put the person's groups in the ID
	// token (a Keycloak client scope, Okta's groups, ...).
	Scopes []string `json:"scopes"`
}

// AsksOfflineAccess says whether the offline_access scope is asked
// (server.sso.offlineAccess, default true).
func (s SSO) AsksOfflineAccess() bool { return s.OfflineAccess == nil || *s.OfflineAccess }

// ssoDefaults fills server.sso's defaults and resolves its secret file.
func ssoDefaults(s *SSO, base string) {
	if s == nil {
		return
	}
	if s.GroupsClaim == "" {
		s.GroupsClaim = DefaultGroupsClaim
	}
	if s.UsernameClaim == "" {
		s.UsernameClaim = DefaultUsernameClaim
	}
	if s.SessionTTL.Duration == 0 {
		s.SessionTTL.Duration = DefaultSessionTTL
	}
	if s.Scopes == nil {
		s.Scopes = slices.Clone(DefaultSSOScopes)
	}
	if s.ClientSecret != nil && s.ClientSecret.File != "" {
		s.ClientSecret.File = resolvePath(base, s.ClientSecret.File)
	}
}

// sso checks server.sso, each problem naming its field.
func (v *validator) sso(s *SSO) {
	if s == nil {
		return
	}
	v.httpURL("server.sso.issuer", s.Issuer)
	if u, err := url.Parse(s.Issuer); err == nil && s.Issuer != "" && (u.RawQuery != "" || u.Fragment != "") {
		v.addf("server.sso.issuer", "%q has a query or fragment: want the issuer URL exactly as the provider's tokens name it", s.Issuer)
	}
	if s.ClientID == "" {
		v.addf("server.sso.clientID", "required: the web UI's client id at the provider")
	}
	if s.ClientSecret == nil {
		v.addf("server.sso.clientSecret", "required: where the web UI client's secret comes from (env or file)")
	} else {
		s.ClientSecretValue = v.resolveSecret("server.sso.clientSecret", s.ClientSecret)
	}
	if s.CLIClientID != "" && s.CLIClientID == s.ClientID {
		v.addf("server.sso.cliClientID", "%q is the web UI's client: the CLI needs its own public client (device grant), or its tokens would be the web client's", s.CLIClientID)
	}
	if d := s.SessionTTL.Duration; d < time.Minute || d > MaxSessionTTL {
		v.addf("server.sso.sessionTTL", "%s is out of range: want 1m to %s", d, MaxSessionTTL)
	}
	v.ssoScopes(s.Scopes)
}

// ssoScopes checks server.sso.scopes: openid among them, offline_access
// not (offlineAccess asks it), each a scope token (RFC 6749 3.3) once.
func (v *validator) ssoScopes(scopes []string) {
	if !slices.Contains(scopes, ScopeOpenID) {
		v.addf("server.sso.scopes", "%v lacks %s: an OpenID Connect login asks it", scopes, ScopeOpenID)
	}
	for i, sc := range scopes {
		path := fmt.Sprintf("server.sso.scopes[%d]", i)
		switch {
		case sc == ScopeOfflineAccess:
			v.addf(path, "%s is asked unless server.sso.offlineAccess is false: leave it out of scopes", sc)
		case !scopeToken(sc):
			v.addf(path, "%q is not a scope: want printable ASCII without spaces, quotes or backslashes (RFC 6749 3.3)", sc)
		case slices.Contains(scopes[:i], sc):
			v.addf(path, "%s is listed twice", sc)
		}
	}
}

// scopeToken says whether s is a scope-token: %x21 / %x23-5B / %x5D-7E,
// at least one.
func scopeToken(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e || r == '"' || r == '\\' })
}

// SSORedirectURL is the web client's redirect URL: externalURL (the
// server's, defaults applied) + SSOCallbackPath.
func SSORedirectURL(externalURL string) string {
	u, err := url.Parse(externalURL)
	if err != nil {
		return externalURL + SSOCallbackPath
	}
	u.Path = pathJoin(u.Path, SSOCallbackPath)
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}

func pathJoin(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}
