package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// storage is the provider's op.Storage and op.DeviceAuthorizationStorage,
// in memory.
type storage struct {
	key      *rsa.PrivateKey
	kid      string
	lifetime time.Duration
	// refused are the scopes an authorization request is refused for.
	refused []string
	// groupsScope is the scope that puts the groups claim in the tokens
	// (GroupsScope).
	groupsScope string

	mu       sync.Mutex
	users    map[string]User
	clients  map[string]Client
	requests map[string]*authRequest // by id
	codes    map[string]string       // code -> request id
	access   map[string]accessToken  // by id
	refresh  map[string]*refreshRequest
	devices  map[string]*op.DeviceAuthorizationState // by device code
	userCode map[string]string                       // user code -> device code
	// refreshCount is the refresh grants answered, by subject.
	refreshCount map[string]int
}

func newStorage(key *rsa.PrivateKey, users []User, clients []Client) *storage {
	s := &storage{
		key: key, kid: keyID(key), lifetime: 10 * time.Minute, groupsScope: "groups",
		users: map[string]User{}, clients: map[string]Client{},
		requests: map[string]*authRequest{}, codes: map[string]string{}, access: map[string]accessToken{},
		refresh: map[string]*refreshRequest{}, devices: map[string]*op.DeviceAuthorizationState{}, userCode: map[string]string{},
		refreshCount: map[string]int{},
	}
	for _, u := range users {
		s.users[u.Name] = u
	}
	for _, c := range clients {
		s.clients[c.ID] = c
	}
	return s
}

var errNotFound = errors.New("not found")

func randomID() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *storage) checkPassword(name, password string) error {
	u, ok := s.users[name]
	if !ok || u.Password != password {
		return errors.New("wrong user or password")
	}
	return nil
}

func (s *storage) setGroups(name string, groups []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := s.users[name]
	u.Groups = slices.Clone(groups)
	s.users[name] = u
}

// logIn completes the code flow's request id as the user name.
func (s *storage) logIn(id, name, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkPassword(name, password); err != nil {
		return err
	}
	r, ok := s.requests[id]
	if !ok {
		return errors.New("unknown login request")
	}
	r.subject, r.done, r.authTime = name, true, time.Now()
	return nil
}

// approveDevice completes the device authorization of userCode as name.
func (s *storage) approveDevice(userCode, name, password string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkPassword(name, password); err != nil {
		return err
	}
	d, ok := s.devices[s.userCode[userCode]]
	if !ok || time.Now().After(d.Expires) {
		return errors.New("unknown or expired code")
	}
	d.Subject, d.Done, d.AuthTime, d.AMR = name, true, time.Now(), []string{"pwd"}
	return nil
}

// refuse is invalid_scope when scopes ask one the provider refuses
// (RefuseScopes).
func (s *storage) refuse(scopes []string) error {
	for _, sc := range scopes {
		if slices.Contains(s.refused, sc) {
			return oidc.ErrInvalidScope().WithDescription("this provider does not grant the scope %s", sc)
		}
	}
	return nil
}

// op.AuthStorage

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if err := s.refuse(req.Scopes); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &authRequest{id: randomID(), req: *req}
	s.requests[r.id] = r
	return r, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return nil, errNotFound
	}
	return r, nil
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

type accessToken struct {
	subject, clientID string
	expires           time.Time
}

func (s *storage) CreateAccessToken(_ context.Context, req op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newAccess(req)
}

func (s *storage) newAccess(req op.TokenRequest) (string, time.Time, error) {
	id := randomID()
	exp := time.Now().Add(s.lifetime)
	clientID := ""
	if c, ok := req.(interface{ GetClientID() string }); ok {
		clientID = c.GetClientID()
	}
	s.access[id] = accessToken{subject: req.GetSubject(), clientID: clientID, expires: exp}
	return id, exp, nil
}

func (s *storage) CreateAccessAndRefreshTokens(_ context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, exp, err := s.newAccess(req)
	if err != nil {
		return "", "", time.Time{}, err
	}
	r := &refreshRequest{subject: req.GetSubject(), audience: req.GetAudience(), scopes: req.GetScopes()}
	if ir, ok := req.(op.IDTokenRequest); ok {
		r.clientID, r.amr, r.authTime = ir.GetClientID(), ir.GetAMR(), ir.GetAuthTime()
	}
	if current != "" { // rotation: the old one is spent
		old, ok := s.refresh[current]
		if !ok {
			return "", "", time.Time{}, op.ErrInvalidRefreshToken
		}
		r.clientID, r.amr, r.authTime = old.clientID, old.amr, old.authTime
		delete(s.refresh, current)
		s.refreshCount[r.subject]++
	}
	token := randomID()
	s.refresh[token] = r
	return id, token, exp, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, token string) (op.RefreshTokenRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refresh[token]
	if !ok {
		return nil, op.ErrInvalidRefreshToken
	}
	c := *r
	return &c, nil
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, token, _, _ string) *oidc.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.refresh, token)
	delete(s.access, token)
	return nil
}

// revokeLogins forgets every refresh and access token of the user name:
// their next refresh is refused (invalid_grant), as a provider does for a
// person disabled or signed out everywhere.
func (s *storage) revokeLogins(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.refresh {
		if r.subject == name {
			delete(s.refresh, k)
			n++
		}
	}
	for k, a := range s.access {
		if a.subject == name {
			delete(s.access, k)
		}
	}
	return n
}

// refreshTokens counts the refresh tokens the user name holds.
func (s *storage) refreshTokens(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.refresh {
		if r.subject == name {
			n++
		}
	}
	return n
}

// refreshes counts the refresh grants the provider answered, per user.
func (s *storage) refreshed(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refreshCount[name]
}

func (s *storage) GetRefreshTokenInfo(_ context.Context, _, token string) (string, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refresh[token]
	if !ok {
		return "", "", op.ErrInvalidRefreshToken
	}
	return r.subject, token, nil
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.kid, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{id: s.kid, key: &s.key.PublicKey}}, nil
}

// op.OPStorage

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok {
		return nil, fmt.Errorf("client %q: %w", id, errNotFound)
	}
	return client{c: c, lifetime: s.lifetime, groupsScope: s.groupsScope, refused: s.refused}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	if !ok || c.Secret == "" || c.Secret != secret {
		return errors.New("wrong client id or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, subject, _ string, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.userinfo(info, subject, scopes)
}

func (s *storage) userinfo(info *oidc.UserInfo, subject string, scopes []string) error {
	u, ok := s.users[subject]
	if !ok {
		return fmt.Errorf("user %q: %w", subject, errNotFound)
	}
	info.Subject = u.sub()
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.Email != "")
		case oidc.ScopeProfile:
			info.PreferredUsername, info.Name = u.Name, u.Name
		case s.groupsScope:
			info.AppendClaims("groups", slices.Clone(u.Groups))
		}
	}
	return nil
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[tokenID]
	if !ok || time.Now().After(t.expires) {
		return errors.New("token expired or unknown")
	}
	return s.userinfo(info, t.subject, []string{oidc.ScopeEmail, oidc.ScopeProfile, s.groupsScope})
}

func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, tokenID, subject, clientID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.access[tokenID]
	if !ok || time.Now().After(t.expires) {
		return nil // inactive
	}
	resp.Active, resp.Subject, resp.ClientID = true, s.users[t.subject].sub(), t.clientID
	return nil
}

// sub is u's sub claim. The provider keeps its logins, tokens and
// requests by the login name; every token and answer it gives names the
// person by this.
func (u User) sub() string {
	if u.Subject != "" {
		return u.Subject
	}
	return u.Name
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile not supported")
}

func (s *storage) ValidateJWTProfileScopes(_ context.Context, _ string, scopes []string) ([]string, error) {
	return scopes, nil
}

func (s *storage) Health(context.Context) error { return nil }

// op.DeviceAuthorizationStorage

func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	if err := s.refuse(scopes); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.userCode[userCode]; ok {
		return op.ErrDuplicateUserCode
	}
	s.devices[deviceCode] = &op.DeviceAuthorizationState{ClientID: clientID, Scopes: scopes, Expires: expires}
	s.userCode[userCode] = deviceCode
	return nil
}

func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.ClientID != clientID {
		return nil, errNotFound
	}
	c := *d
	return &c, nil
}

// authRequest is a code flow's request.
type authRequest struct {
	id       string
	req      oidc.AuthRequest
	subject  string
	done     bool
	authTime time.Time
}

func (a *authRequest) GetID() string  { return a.id }
func (a *authRequest) GetACR() string { return "" }
func (a *authRequest) GetAMR() []string {
	if a.done {
		return []string{"pwd"}
	}
	return nil
}
func (a *authRequest) GetAudience() []string  { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time { return a.authTime }
func (a *authRequest) GetClientID() string    { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }

// refreshRequest is what a refresh token stands for.
type refreshRequest struct {
	subject, clientID string
	audience, scopes  []string
	amr               []string
	authTime          time.Time
}

func (r *refreshRequest) GetAMR() []string             { return r.amr }
func (r *refreshRequest) GetAudience() []string        { return r.audience }
func (r *refreshRequest) GetAuthTime() time.Time       { return r.authTime }
func (r *refreshRequest) GetClientID() string          { return r.clientID }
func (r *refreshRequest) GetScopes() []string          { return r.scopes }
func (r *refreshRequest) GetSubject() string           { return r.subject }
func (r *refreshRequest) SetCurrentScopes(sc []string) { r.scopes = sc }

// client is a registered client as op sees it.
type client struct {
	c           Client
	lifetime    time.Duration
	groupsScope string
	// refused reach CreateAuthRequest, which refuses them, rather than
	// being dropped as scopes the provider does not know.
	refused []string
}

func (c client) GetID() string                    { return c.c.ID }
func (c client) RedirectURIs() []string           { return c.c.RedirectURIs }
func (c client) PostLogoutRedirectURIs() []string { return nil }
func (c client) ApplicationType() op.ApplicationType {
	if c.c.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}
func (c client) AuthMethod() oidc.AuthMethod {
	if c.c.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c client) GrantTypes() []oidc.GrantType {
	if c.c.Secret == "" { // a CLI: the device flow, or the code flow on a loopback redirect
		return []oidc.GrantType{oidc.GrantTypeDeviceCode, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	}
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c client) LoginURL(id string) string           { return "/login?authRequestID=" + id }
func (c client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c client) IDTokenLifetime() time.Duration      { return c.lifetime }
func (c client) DevMode() bool                       { return true } // http redirects on loopback
func (c client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c client) IsScopeAllowed(scope string) bool {
	return scope == c.groupsScope || slices.Contains(c.refused, scope)
}
func (c client) IDTokenUserinfoClaimsAssertion() bool { return true } // groups in the ID token
func (c client) ClockSkew() time.Duration             { return 0 }
