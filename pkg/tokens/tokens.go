package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/fault"
)

// Collection is the state documents' collection the tokens are kept in,
// one per token name.
const Collection = "api-tokens"

// SecretPrefix starts every secret Create makes (a secret scanner's
// pattern; the rest is 32 random bytes, base16).
const SecretPrefix = "flt_"

// Grant is a role granted in a project ("*": every project, and with
// role admin the fleet's own permissions).
type Grant struct {
	Project string `json:"project"`
	Role    string `json:"role"`
}

// Token is one token's document. A config token's (Config) holds only
// its name, the SHA-256 of the secret it had and when it was revoked: the
// config gives its grants, and a new secret in the config is a new token.
type Token struct {
	Name      string     `json:"name"`
	SHA256    string     `json:"sha256"` // hex
	Grants    []Grant    `json:"grants,omitempty"`
	CreatedBy string     `json:"createdBy,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	RevokedBy string     `json:"revokedBy,omitempty"`
	Config    bool       `json:"config,omitempty"`
	// Automation marks a token a machine uses (CI, a bot): its approvals
	// never count (as server.apiTokens[].automation).
	Automation bool `json:"automation,omitempty"`
}

// Spec is what Create makes a token of.
type Spec struct {
	Name       string
	Grants     []Grant
	By         string     // who creates it
	Expires    *time.Time // nil: never
	Automation bool
}

// Valid says why t does not authenticate at now ("" if it does).
func (t Token) Valid(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return "revoked"
	case t.ExpiresAt != nil && !now.Before(*t.ExpiresAt):
		return "expired"
	}
	return ""
}

// Documents is the part of the state port the tokens live in (pkg/store,
// pkg/state/natskv).
type Documents interface {
	Update(ctx context.Context, collection, key string, v any, fn func(found bool) error) error
	List(ctx context.Context, collection string, fn func(key string, raw []byte) error) error
}

// Watcher is a Documents other replicas write to too (natskv): Watch
// calls fn with every document of collection, then with each change,
// until ctx ends; it returns once the documents there were are delivered.
type Watcher interface {
	Watch(ctx context.Context, collection string, fn func(raw []byte)) error
}

// Registry is the tokens, read from a cache of their documents.
type Registry struct {
	docs Documents
	now  func() time.Time

	mu       sync.RWMutex
	byName   map[string]Token
	onChange func([]Token)
}

// New returns the registry of the tokens kept in docs; Start loads them.
func New(docs Documents, now func() time.Time) *Registry {
	if now == nil {
		now = time.Now
	}
	return &Registry{docs: docs, now: now, byName: map[string]Token{}}
}

// OnChange has fn called with every token (revoked ones too) whenever the
// cache changes (pkg/authz's grants follow it).
func (r *Registry) OnChange(fn func([]Token)) { r.onChange = fn }

// Start fills the cache: from a watch of the documents when docs is a
// Watcher (it keeps the cache current until ctx ends), else from a list
// of them (a single process: its own writes keep it current).
func (r *Registry) Start(ctx context.Context) error {
	if w, ok := r.docs.(Watcher); ok {
		return w.Watch(ctx, Collection, func(raw []byte) { r.apply(raw) })
	}
	return r.docs.List(ctx, Collection, func(_ string, raw []byte) error {
		r.apply(raw)
		return nil
	})
}

// apply puts a document into the cache.
func (r *Registry) apply(raw []byte) {
	var t Token
	if err := json.Unmarshal(raw, &t); err != nil || t.Name == "" {
		return
	}
	r.put(t)
}

func (r *Registry) put(t Token) {
	r.mu.Lock()
	r.byName[t.Name] = t
	all := slices.Collect(maps.Values(r.byName))
	r.mu.Unlock()
	if r.onChange != nil {
		r.onChange(all)
	}
}

// Errors of Create and Revoke: pkg/fault kinds (the API's statuses).
var (
	ErrExists   = fault.New(fault.ErrConflict, "a token of that name exists")
	ErrNotFound = fault.New(fault.ErrNotFound, "no token of that name")
)

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)

// ValidName says why name cannot name a token ("" if it can).
func ValidName(name string) string {
	if !validName.MatchString(name) {
		return "a token's name is 1 to 63 lower-case letters, digits, '.', '_' or '-', starting and ending with a letter or digit"
	}
	return ""
}

// Sum is the hex SHA-256 of a secret.
func Sum(secret string) string {
	s := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(s[:])
}

// Create makes the token name with grants, created by by, expiring at
// expires (nil: never), and returns its secret: the only time it is
// known. taken says whether a config token has that name (refused too).
func (r *Registry) Create(ctx context.Context, spec Spec, taken bool) (string, Token, error) {
	name := spec.Name
	if why := ValidName(name); why != "" {
		return "", Token{}, fault.Permanent(errors.New(why))
	}
	if taken {
		return "", Token{}, fmt.Errorf("%w: %s is a token of the config", ErrExists, name)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", Token{}, fmt.Errorf("making a secret: %w", err)
	}
	secret := SecretPrefix + hex.EncodeToString(b)
	var t Token
	err := r.docs.Update(ctx, Collection, name, &t, func(found bool) error {
		if found {
			return fmt.Errorf("%w: %s (revoked tokens keep their name)", ErrExists, name)
		}
		t = Token{Name: name, SHA256: Sum(secret), Grants: spec.Grants, CreatedBy: spec.By, CreatedAt: r.now().UTC(), ExpiresAt: spec.Expires,
			Automation: spec.Automation}
		return nil
	})
	if err != nil {
		return "", Token{}, fmt.Errorf("creating token %s: %w", name, err)
	}
	r.put(t)
	return secret, t, nil
}

// Revoke revokes the token name, by by: a created one, or (configSum its
// secret's SHA-256, "" for none) the config's token of that name, until
// the config gives it another secret. Revoking a revoked token changes
// nothing.
func (r *Registry) Revoke(ctx context.Context, name, by, configSum string) (Token, error) {
	var t Token
	err := r.docs.Update(ctx, Collection, name, &t, func(found bool) error {
		if configSum != "" { // the config's token
			if found && t.Config && t.SHA256 == configSum && t.RevokedAt != nil {
				return nil
			}
			t = Token{Name: name, SHA256: configSum, Config: true, CreatedAt: r.now().UTC()}
		} else {
			if !found || t.Config {
				return ErrNotFound
			}
			if t.RevokedAt != nil {
				return nil
			}
		}
		at := r.now().UTC()
		t.RevokedAt, t.RevokedBy = &at, by
		return nil
	})
	if err != nil {
		return Token{}, fmt.Errorf("revoking token %s: %w", name, err)
	}
	r.put(t)
	return t, nil
}

// Lookup returns the created token whose secret is secret, valid or not
// (Token.Valid says), compared in constant time.
func (r *Registry) Lookup(secret string) (Token, bool) {
	sum := Sum(secret)
	r.mu.RLock()
	defer r.mu.RUnlock()
	var found Token
	ok := false
	for _, t := range r.byName {
		if !t.Config && subtle.ConstantTimeCompare([]byte(sum), []byte(t.SHA256)) == 1 {
			found, ok = t, true
		}
	}
	return found, ok
}

// RevokedConfig says whether the config's token name, whose secret has
// the SHA-256 sum (hex), is revoked.
func (r *Registry) RevokedConfig(name, sum string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return ok && t.Config && t.RevokedAt != nil && subtle.ConstantTimeCompare([]byte(sum), []byte(t.SHA256)) == 1
}

// List returns every token (config tokens only once revoked), by name.
func (r *Registry) List() []Token {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := slices.Collect(maps.Values(r.byName))
	slices.SortFunc(out, func(a, b Token) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return out
}
