package natskv_test

import (
	"context"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/state/natskv"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// pkg/tokens on the documents of two replicas: a token one creates is
// found by the other, and refused by it once revoked, within the watch's
// latency (measured: well under a second on a local NATS).
func TestTokensAcrossReplicas(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	prefix := newPrefix()
	registry := func() *tokens.Registry {
		d, err := natskv.OpenDocs(ctx, open(t, prefix).nc, natskv.Options{Prefix: prefix}) //nolint:contextcheck // open bounds its setup by the test's own context (t.Context)
		if err != nil {
			t.Fatal(err)
		}
		r := tokens.New(d, nil)
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := registry(), registry()
	secret, _, err := a.Create(ctx, tokens.Spec{Name: "ci", Grants: []tokens.Grant{{Project: "default", Role: "viewer"}}, By: "admin"}, false)
	if err != nil {
		t.Fatal(err)
	}
	seen := func(want string) time.Duration {
		t.Helper()
		start := time.Now()
		for time.Since(start) < 5*time.Second {
			if tok, ok := b.Lookup(secret); ok && tok.Valid(time.Now()) == want {
				return time.Since(start)
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("the other replica does not see ci %q within 5 s", want)
		return 0
	}
	seen("")
	if _, err := a.Revoke(ctx, "ci", "admin", ""); err != nil {
		t.Fatal(err)
	}
	took := seen("revoked")
	t.Logf("a revocation reached the other replica in %s", took)
	if took > time.Second {
		t.Errorf("a revocation took %s to reach the other replica, want under a second", took)
	}
	// A replica started later reads the revoked token.
	if tok, ok := registry().Lookup(secret); !ok || tok.Valid(time.Now()) != "revoked" {
		t.Errorf("a new replica: %+v %v, want ci revoked", tok, ok)
	}
}
