package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// Web sessions of the created API tokens (#31): a config token's session
// is a cookie signed with a key derived from its secret (authn.go), which
// a created token does not have (only its SHA-256 is kept). A created
// token's session is a document of the state port instead, as a person's
// single sign-on session is: the cookie holds an opaque id, the document
// (keyed by the id's SHA-256) its token's name and expiry, so every
// replica reads it, a logout ends it everywhere, and revoking the token
// or its expiry ends its sessions too.
const (
	// TokenSessionCollection is the state documents' collection of the
	// created tokens' web sessions.
	TokenSessionCollection = "token-sessions"
	// tokenSessionPrefix starts a stored session's cookie value: a config
	// token's is "<name>.<expiry>.<mac>", which never starts with it.
	tokenSessionPrefix = "t:"
)

// tokenSession is a created token's web session, as kept.
type tokenSession struct {
	Token     string     `json:"token"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
}

// WithSessions keeps the created tokens' web sessions in docs (the state
// port); without it a created token cannot log in to the web UI.
func WithSessions(docs SSOSessions) AuthnOption { return func(a *Authn) { a.sessions = docs } }

// loginCreated opens a stored session of the created token t; it lasts
// SessionTTL, or until t expires if that is sooner.
func (a *Authn) loginCreated(ctx context.Context, t tokens.Token) (value string, expires time.Time, _ error) {
	if a.sessions == nil {
		return "", time.Time{}, fault.New(fault.ErrUnauthenticated, "this flotilla keeps no web sessions of created API tokens: log in with one of server.apiTokens")
	}
	now := a.now()
	doc := tokenSession{Token: t.Name, CreatedAt: now, ExpiresAt: now.Add(SessionTTL)}
	if t.ExpiresAt != nil && t.ExpiresAt.Before(doc.ExpiresAt) {
		doc.ExpiresAt = *t.ExpiresAt
	}
	id := ssoRandom()
	if err := a.sessions.Put(ctx, TokenSessionCollection, ssoSessionKey(id), doc); err != nil {
		return "", time.Time{}, fmt.Errorf("keeping the web session of API token %s: %w", t.Name, err)
	}
	return tokenSessionPrefix + id, doc.ExpiresAt, nil
}

// storedSession authenticates a stored session's cookie value: the
// principal of its created token, which must still be valid.
func (a *Authn) storedSession(ctx context.Context, value string) (identity.Principal, error) {
	if a.sessions == nil || a.registry == nil {
		return identity.Principal{}, errors.New("no stored sessions")
	}
	var doc tokenSession
	found, err := a.sessions.Get(ctx, TokenSessionCollection, ssoSessionKey(strings.TrimPrefix(value, tokenSessionPrefix)), &doc)
	switch {
	case err != nil:
		return identity.Principal{}, fmt.Errorf("reading the session: %w", err)
	case !found:
		return identity.Principal{}, errors.New("unknown session")
	case doc.EndedAt != nil:
		return identity.Principal{}, errors.New("session ended")
	case !a.now().Before(doc.ExpiresAt):
		return identity.Principal{}, errors.New("session expired")
	}
	for _, t := range a.registry.List() {
		if t.Name != doc.Token || t.Config {
			continue
		}
		if why := t.Valid(a.now()); why != "" {
			return identity.Principal{}, errors.New("session of an API token that is " + why)
		}
		p := identity.OfToken(t.Name, identity.ViaSession)
		p.Automation = t.Automation
		return p, nil
	}
	return identity.Principal{}, errors.New("session of an API token that no longer exists")
}

// EndSession ends the stored session whose cookie value is value, on
// every replica (a config token's session is only dropped from the
// browser: it is not kept).
func (a *Authn) EndSession(ctx context.Context, value string) error {
	if a.sessions == nil || !strings.HasPrefix(value, tokenSessionPrefix) {
		return nil
	}
	key := ssoSessionKey(strings.TrimPrefix(value, tokenSessionPrefix))
	var doc tokenSession
	found, err := a.sessions.Get(ctx, TokenSessionCollection, key, &doc)
	if err != nil || !found || doc.EndedAt != nil {
		return err
	}
	now := a.now()
	doc.EndedAt = &now
	if err := a.sessions.Put(ctx, TokenSessionCollection, key, doc); err != nil {
		return fmt.Errorf("ending the web session of API token %s: %w", doc.Token, err)
	}
	return nil
}

// SweepSessions deletes the created tokens' sessions that expired or were
// ended, or whose token was revoked, expired or deleted, so that the
// state keeps only live ones; it says how many.
func (a *Authn) SweepSessions(ctx context.Context) (int, error) {
	if a.sessions == nil || a.registry == nil {
		return 0, nil
	}
	now := a.now()
	valid := map[string]bool{}
	for _, t := range a.registry.List() {
		valid[t.Name] = !t.Config && t.Valid(now) == ""
	}
	var gone []string
	err := a.sessions.List(ctx, TokenSessionCollection, func(key string, raw []byte) error {
		var doc tokenSession
		if err := json.Unmarshal(raw, &doc); err != nil || doc.EndedAt != nil || !now.Before(doc.ExpiresAt) || !valid[doc.Token] {
			gone = append(gone, key)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("listing the API tokens' web sessions: %w", err)
	}
	for i, key := range gone {
		if err := a.sessions.Delete(ctx, TokenSessionCollection, key); err != nil {
			return i, fmt.Errorf("deleting an ended web session: %w", err)
		}
	}
	return len(gone), nil
}

// RunSweeper runs sweep (of the sessions what names) at start and every
// interval until ctx ends; a sweep that fails is logged and tried again
// at the next.
func RunSweeper(ctx context.Context, every time.Duration, log *slog.Logger, what string, sweep func(context.Context) (int, error)) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		c, cancel := context.WithTimeout(ctx, every/2)
		n, err := sweep(c)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			log.WarnContext(ctx, "sweeping the "+what, "error", err, "deleted", n)
		case n > 0:
			log.InfoContext(ctx, "swept ended "+what, "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
