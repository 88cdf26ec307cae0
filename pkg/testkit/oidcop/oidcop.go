package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is a person the provider knows. Their subject ("sub") is Subject,
// else Name.
type User struct {
	Name     string   // login name and preferred_username
	Subject  string   // the sub claim, opaque as Keycloak's, Okta's, Google's ("": Name)
	Password string   // what the login form wants
	Email    string   // the email claim ("" none)
	Groups   []string // the groups claim
}

// Client is an application registered with the provider.
type Client struct {
	ID string
	// Secret makes a confidential web client (code flow, client_secret_basic
	// or _post); "" makes a public native client (device flow, or the code
	// flow with PKCE on a loopback redirect: a registered
	// http://127.0.0.1/<path> takes any port, RFC 8252; no secret).
	Secret       string
	RedirectURIs []string // the code flow's callbacks
}

// Option configures a Provider.
type Option func(*Provider)

// TokenLifetime is how long ID and access tokens last (default 10 minutes).
func TokenLifetime(d time.Duration) Option { return func(p *Provider) { p.store.lifetime = d } }

// RefuseScopes has the provider refuse an authorization request that asks
// one of scopes, sending the browser back with error=invalid_scope (RFC
// 6749 4.1.2.1), as Google refuses offline_access.
func RefuseScopes(scopes ...string) Option {
	return func(p *Provider) { p.store.refused = append(p.store.refused, scopes...) }
}

// GroupsScope is the scope for which the provider puts the groups claim
// in the ID token (default "groups"), as a provider whose groups come
// with a scope of its own (a Keycloak client scope, say); the scope
// "groups" is then one it does not know.
func GroupsScope(scope string) Option { return func(p *Provider) { p.store.groupsScope = scope } }

// Provider is a running OpenID provider.
type Provider struct {
	// Issuer is its issuer URL, http://127.0.0.1:<port>.
	Issuer string
	store  *storage
	srv    *http.Server
	done   chan error
}

// Start serves a provider of users and clients on a free loopback port
// until Close.
func Start(users []User, clients []Client, opts ...Option) (*Provider, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, fmt.Errorf("generating the signing key: %w", err)
	}
	p := &Provider{store: newStorage(key, users, clients), done: make(chan error, 1)}
	for _, o := range opts {
		o(p)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening: %w", err)
	}
	p.Issuer = "http://" + l.Addr().String()
	var cryptoKey [32]byte
	if _, err := rand.Read(cryptoKey[:]); err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("making the token key: %w", err)
	}
	provider, err := op.NewOpenIDProvider(p.Issuer, &op.Config{
		CryptoKey:             cryptoKey,
		CodeMethodS256:        true,
		AuthMethodPost:        true,
		GrantTypeRefreshToken: true,
		SupportedUILocales:    []language.Tag{language.English},
		DeviceAuthorization: op.DeviceAuthorizationConfig{
			Lifetime:     5 * time.Minute,
			PollInterval: time.Second,
			UserFormPath: "/device",
			UserCode:     op.UserCodeBase20,
		},
	}, p.store, op.WithAllowInsecure())
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("making the provider: %w", err)
	}
	issuer := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	callback := op.AuthCallbackURL(provider)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusOK, loginPage, page{Action: "/login", ID: r.FormValue("authRequestID")})
	})
	mux.Handle("POST /login", issuer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.FormValue("id")
		if err := p.store.logIn(id, r.FormValue("username"), r.FormValue("password")); err != nil {
			render(w, http.StatusUnauthorized, loginPage, page{Action: "/login", ID: id, Error: err.Error()})
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	}))
	mux.HandleFunc("GET /device", func(w http.ResponseWriter, r *http.Request) {
		render(w, http.StatusOK, loginPage, page{Action: "/device", UserCode: r.FormValue("user_code"), Device: true})
	})
	mux.HandleFunc("POST /device", func(w http.ResponseWriter, r *http.Request) {
		code := r.FormValue("user_code")
		if err := p.store.approveDevice(code, r.FormValue("username"), r.FormValue("password")); err != nil {
			render(w, http.StatusUnauthorized, loginPage, page{Action: "/device", UserCode: code, Device: true, Error: err.Error()})
			return
		}
		render(w, http.StatusOK, approvedPage, page{UserCode: code})
	})
	mux.Handle("/", provider)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { p.done <- p.srv.Serve(l) }()
	return p, nil
}

// Close stops the provider.
func (p *Provider) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if serr := <-p.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// SetGroups changes a user's groups: the tokens issued from now on carry
// them (a person moved to another team).
func (p *Provider) SetGroups(user string, groups []string) {
	p.store.setGroups(user, groups)
}

// RevokeLogins forgets every refresh token (and access token) the user
// holds: a refresh with one is refused with invalid_grant from now on, as
// when a provider disables a person or signs them out everywhere. It says
// how many refresh tokens it revoked.
func (p *Provider) RevokeLogins(user string) int {
	return p.store.revokeLogins(user)
}

// RefreshTokens is how many refresh tokens the user holds now (none when
// no login asked offline_access).
func (p *Provider) RefreshTokens(user string) int {
	return p.store.refreshTokens(user)
}

// Refreshes is how many refresh grants the provider answered for user
// (each rotates the refresh token).
func (p *Provider) Refreshes(user string) int {
	return p.store.refreshed(user)
}

type page struct {
	Action, ID, UserCode, Error string
	Device                      bool
}

var (
	loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html><head><title>Test provider: log in</title></head><body>
<h1>{{if .Device}}Approve a device{{else}}Log in{{end}}</h1>
{{if .Error}}<p id="error">{{.Error}}</p>{{end}}
<form method="post" action="{{.Action}}">
{{if .Device}}<label>Code <input id="user_code" name="user_code" value="{{.UserCode}}"></label>{{else}}<input type="hidden" name="id" value="{{.ID}}">{{end}}
<label>User <input id="username" name="username" autocomplete="username"></label>
<label>Password <input id="password" name="password" type="password"></label>
<button id="submit" type="submit">{{if .Device}}Approve{{else}}Log in{{end}}</button>
</form></body></html>`))
	approvedPage = template.Must(template.New("approved").Parse(`<!doctype html>
<html><head><title>Test provider: device approved</title></head><body>
<p id="approved">Device {{.UserCode}} approved: you can go back to it.</p></body></html>`))
)

func render(w http.ResponseWriter, status int, t *template.Template, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = t.Execute(w, p)
}

// keyID names the signing key in the JWKS.
func keyID(key *rsa.PrivateKey) string {
	sum := sha256.Sum256(key.N.Bytes())
	return fmt.Sprintf("%x", sum[:8])
}
