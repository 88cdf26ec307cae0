package identity

import "context"

// Via is how a request proved who it comes from.
type Via string

const (
	// ViaToken: an API token in "Authorization: Bearer <token>".
	ViaToken Via = "token"
	// ViaSession: the web UI's session cookie, set by logging in with an
	// API token.
	ViaSession Via = "session"
	// ViaAnonymous: no credential, on a read that server.anonymousRead
	// opens.
	ViaAnonymous Via = "anonymous"
)

// Principal is who a request comes from.
type Principal struct {
	Subject    string   // OIDC "sub" (or the token's name for tokens)
	Name       string   // e-mail or Username: what the audit shows
	Username   string   // the provider's login name (server.sso.usernameClaim), "" for tokens
	Groups     []string // OIDC groups claim; a token's configured groups
	Token      string   // the API token's name, "" for a person's session
	Automation bool     // a token marked automation: never counts as an approver
	Via        Via      // how the request proved it
}

// Anonymous is the principal of a request with no credential, where
// reads are open to anyone (server.anonymousRead).
var Anonymous = Principal{Name: "anonymous", Via: ViaAnonymous}

// OfToken is the principal of the API token named name, whether sent as a
// bearer token (ViaToken) or through a session it opened (ViaSession).
func OfToken(name string, via Via) Principal {
	return Principal{Subject: name, Name: name, Token: name, Via: via}
}

// Authenticated says whether p proved who it is (a token or a session),
// as a request that changes something must.
func (p Principal) Authenticated() bool {
	return p.Via == ViaToken || p.Via == ViaSession
}

type key struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, key{}, p)
}

// FromContext returns the principal ctx carries, and whether it carries
// one.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(key{}).(Principal)
	return p, ok
}
