package identity

import (
	"slices"
	"strings"
)

// ClaimNames are the ID token's claims a person's principal is read from
// (server.sso.usernameClaim and groupsClaim).
type ClaimNames struct {
	Username string // the person's login name at the provider: preferred_username, upn, login, ...
	Groups   string // the person's groups: a list of strings, or one string
}

// OfClaims is the principal of the person an ID token names: sub is its
// subject, claims its claims. Its Name, what the audit shows, is the
// email when the provider does not say it is unverified, else the
// username claim, else the subject; Username is the username claim;
// Groups the groups claim's strings. Via is ViaSession: a bearer ID
// token's caller sets ViaToken.
func OfClaims(sub string, claims map[string]any, names ClaimNames) Principal {
	str := func(k string) string {
		v, _ := claims[k].(string)
		return strings.TrimSpace(v)
	}
	p := Principal{Subject: sub, Via: ViaSession}
	if names.Username != "" {
		p.Username = str(names.Username)
	}
	p.Name = str("email")
	if p.Name == "" || claims["email_verified"] == false {
		p.Name = p.Username
	}
	if p.Name == "" {
		p.Name = sub
	}
	switch g := claims[names.Groups].(type) {
	case []any:
		for _, v := range g {
			if v, ok := v.(string); ok && v != "" {
				p.Groups = append(p.Groups, v)
			}
		}
	case string:
		if g != "" {
			p.Groups = []string{g}
		}
	}
	return p
}

// Names are the names p is known by, each once, in this order: its Name,
// its Username, its Subject; none for an anonymous request. They are
// what every comparison of who p is reads, and nothing else is: a role
// granted to user:<name> (Subjects), a wave's approvals.from naming
// user:<name>, and separation of duties against the pusher a webhook
// names (a registry's or git host's login, which is the provider's
// username where both share a directory, not the opaque subject nor
// the email Keycloak, Okta or Google give). The email's local part is
// not one of them: alice@example.com and alice@elsewhere.org share it,
// and a name granted a role must be one the provider vouches for.
func (p Principal) Names() []string {
	if p.Via == ViaAnonymous {
		return nil
	}
	var out []string
	for _, n := range []string{p.Name, p.Username, p.Subject} {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// KnownAs is the name of p's that equals name, case aside (the form a
// git host or registry gives it may differ), "" when none does.
func (p Principal) KnownAs(name string) string {
	for _, n := range p.Names() {
		if strings.EqualFold(n, name) {
			return n
		}
	}
	return ""
}
