package tokens_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/fault"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(filepath.Join(dir, "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A created token is kept as its SHA-256, found by its secret until it is
// revoked or expires, and read back by a registry opened later (a
// restart); a config token is revoked by its hash.
func TestCreateLookupRevoke(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg := tokens.New(s, clock)
	if err := reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var changes int
	reg.OnChange(func([]tokens.Token) { changes++ })
	exp := now.Add(30 * 24 * time.Hour)
	secret, tok, err := reg.Create(t.Context(), tokens.Spec{Name: "ci", Grants: []tokens.Grant{{Project: "payments", Role: "operator"}}, By: "admin", Expires: &exp}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, tokens.SecretPrefix) || len(secret) != len(tokens.SecretPrefix)+64 {
		t.Errorf("secret %q: want %s and 64 hex digits", secret, tokens.SecretPrefix)
	}
	if tok.SHA256 != tokens.Sum(secret) || strings.Contains(tok.SHA256, secret) {
		t.Errorf("kept %q, want the SHA-256 of the secret", tok.SHA256)
	}
	if _, _, err := reg.Create(t.Context(), tokens.Spec{Name: "ci", By: "admin"}, false); !errors.Is(err, fault.ErrConflict) {
		t.Errorf("creating ci again: %v, want a conflict", err)
	}
	if _, _, err := reg.Create(t.Context(), tokens.Spec{Name: "default", By: "admin"}, true); !errors.Is(err, fault.ErrConflict) {
		t.Errorf("creating a config token's name: %v, want a conflict", err)
	}
	if _, _, err := reg.Create(t.Context(), tokens.Spec{Name: "Bad Name", By: "admin"}, false); !fault.IsPermanent(err) {
		t.Errorf("creating Bad Name: %v, want a permanent error", err)
	}
	if got, ok := reg.Lookup(secret); !ok || got.Valid(now) != "" || got.Name != "ci" {
		t.Fatalf("Lookup = %+v %v, want ci, valid", got, ok)
	}
	if _, ok := reg.Lookup(secret + "x"); ok {
		t.Error("another secret found a token")
	}
	if got, _ := reg.Lookup(secret); got.Valid(exp) != "expired" {
		t.Errorf("at its expiry: %q, want expired", got.Valid(exp))
	}
	if _, err := reg.Revoke(t.Context(), "ci", "admin", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := reg.Lookup(secret); got.Valid(now) != "revoked" || got.RevokedBy != "admin" {
		t.Errorf("after revoke: %+v, want revoked by admin", got)
	}
	if _, err := reg.Revoke(t.Context(), "nobody", "admin", ""); !errors.Is(err, fault.ErrNotFound) {
		t.Errorf("revoking nobody: %v, want not found", err)
	}
	// A config token: revoked by the hash of its secret, not another's.
	if _, err := reg.Revoke(t.Context(), "default", "admin", tokens.Sum("old")); err != nil {
		t.Fatal(err)
	}
	if !reg.RevokedConfig("default", tokens.Sum("old")) || reg.RevokedConfig("default", tokens.Sum("new")) {
		t.Error("the config token default: revoked for its old secret only, want")
	}
	if _, ok := reg.Lookup("old"); ok {
		t.Error("a config token's revocation authenticates as a created token")
	}
	if changes != 3 {
		t.Errorf("OnChange called %d times, want 3 (create ci, revoke ci, revoke default)", changes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A restart reads them back.
	s = openStore(t, dir)
	t.Cleanup(func() { _ = s.Close() })
	again := tokens.New(s, clock)
	if err := again.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tk := range again.List() {
		names = append(names, tk.Name)
	}
	if diff := cmp.Diff([]string{"ci", "default"}, names); diff != "" {
		t.Errorf("after a restart (-want +got):\n%s", diff)
	}
	if got, ok := again.Lookup(secret); !ok || got.Valid(now) != "revoked" {
		t.Errorf("after a restart, ci: %+v %v, want revoked", got, ok)
	}
}
