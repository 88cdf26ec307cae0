package identity_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

func TestContext(t *testing.T) {
	tests := []struct {
		name     string
		ctx      context.Context
		want     identity.Principal
		wantOK   bool
		wantAuth bool
	}{
		{"none", t.Context(), identity.Principal{}, false, false},
		{"a token", identity.WithPrincipal(t.Context(), identity.OfToken("ci", identity.ViaToken)),
			identity.Principal{Subject: "ci", Name: "ci", Token: "ci", Via: identity.ViaToken}, true, true},
		{"a session", identity.WithPrincipal(t.Context(), identity.OfToken("alice", identity.ViaSession)),
			identity.Principal{Subject: "alice", Name: "alice", Token: "alice", Via: identity.ViaSession}, true, true},
		{"anonymous", identity.WithPrincipal(t.Context(), identity.Anonymous),
			identity.Principal{Name: "anonymous", Via: identity.ViaAnonymous}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := identity.FromContext(tt.ctx)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
			if ok != tt.wantOK || got.Authenticated() != tt.wantAuth {
				t.Errorf("carried %v, authenticated %v; want %v, %v", ok, got.Authenticated(), tt.wantOK, tt.wantAuth)
			}
		})
	}
}
