package identity_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// The names a person gets from the ID tokens real providers give: the
// subject is opaque at Keycloak, Okta and Google, the username is what the
// registry and git host know the person by where they share a directory.
func TestOfClaims(t *testing.T) {
	byDefault := identity.ClaimNames{Username: "preferred_username", Groups: "groups"}
	tests := []struct {
		name   string
		sub    string
		claims map[string]any
		names  identity.ClaimNames
		want   identity.Principal
		// wantNames are Names(), wantSubjects Subjects().
		wantNames    []string
		wantSubjects []string
	}{
		{name: "Keycloak: opaque subject, email, preferred_username, groups", sub: "f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55",
			claims: map[string]any{"email": "alice@example.com", "email_verified": true, "preferred_username": "alice", "groups": []any{"release-managers", "payments"}},
			names:  byDefault,
			want: identity.Principal{Subject: "f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55", Name: "alice@example.com", Username: "alice",
				Groups: []string{"release-managers", "payments"}, Via: identity.ViaSession},
			wantNames:    []string{"alice@example.com", "alice", "f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55"},
			wantSubjects: []string{"user:alice@example.com", "user:alice", "user:f3b1c2d4-7e0a-4c5e-9a61-0d2b8f7c1e55", "group:release-managers", "group:payments"}},
		{name: "Google: no username, the email's local part is not one", sub: "104233918273645",
			claims:       map[string]any{"email": "alice@example.com", "email_verified": true},
			names:        byDefault,
			want:         identity.Principal{Subject: "104233918273645", Name: "alice@example.com", Via: identity.ViaSession},
			wantNames:    []string{"alice@example.com", "104233918273645"},
			wantSubjects: []string{"user:alice@example.com", "user:104233918273645"}},
		{name: "an unverified email names no one: the username does", sub: "00u1",
			claims:       map[string]any{"email": "ceo@example.com", "email_verified": false, "preferred_username": "mallory"},
			names:        byDefault,
			want:         identity.Principal{Subject: "00u1", Name: "mallory", Username: "mallory", Via: identity.ViaSession},
			wantNames:    []string{"mallory", "00u1"},
			wantSubjects: []string{"user:mallory", "user:00u1"}},
		{name: "another username claim (usernameClaim: login), one group as a string", sub: "00u2",
			claims: map[string]any{"email": "bob@example.com", "preferred_username": "bob@corp.example", "login": "bob", "roles": "release-managers"},
			names:  identity.ClaimNames{Username: "login", Groups: "roles"},
			want: identity.Principal{Subject: "00u2", Name: "bob@example.com", Username: "bob",
				Groups: []string{"release-managers"}, Via: identity.ViaSession},
			wantNames:    []string{"bob@example.com", "bob", "00u2"},
			wantSubjects: []string{"user:bob@example.com", "user:bob", "user:00u2", "group:release-managers"}},
		{name: "no email: the username names the person", sub: "Cg1hbGljZRIFbG9jYWw",
			claims:       map[string]any{"preferred_username": "alice", "groups": []any{"", 7, "ops"}},
			names:        byDefault,
			want:         identity.Principal{Subject: "Cg1hbGljZRIFbG9jYWw", Name: "alice", Username: "alice", Groups: []string{"ops"}, Via: identity.ViaSession},
			wantNames:    []string{"alice", "Cg1hbGljZRIFbG9jYWw"},
			wantSubjects: []string{"user:alice", "user:Cg1hbGljZRIFbG9jYWw", "group:ops"}},
		{name: "a username claim that is no string is none", sub: "00u3",
			claims:       map[string]any{"preferred_username": 42},
			names:        byDefault,
			want:         identity.Principal{Subject: "00u3", Name: "00u3", Via: identity.ViaSession},
			wantNames:    []string{"00u3"},
			wantSubjects: []string{"user:00u3"}},
		{name: "the username is the subject: once", sub: "alice",
			claims:       map[string]any{"email": "alice@example.com", "preferred_username": "alice"},
			names:        byDefault,
			want:         identity.Principal{Subject: "alice", Name: "alice@example.com", Username: "alice", Via: identity.ViaSession},
			wantNames:    []string{"alice@example.com", "alice"},
			wantSubjects: []string{"user:alice@example.com", "user:alice"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identity.OfClaims(tt.sub, tt.claims, tt.names)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("OfClaims (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantNames, got.Names()); diff != "" {
				t.Errorf("Names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSubjects, got.Subjects()); diff != "" {
				t.Errorf("Subjects (-want +got):\n%s", diff)
			}
		})
	}
}

// A token is known by its name, to the policy as token:<name>; an
// anonymous request by no name.
func TestNamesOfTokensAndAnonymous(t *testing.T) {
	tests := []struct {
		name         string
		p            identity.Principal
		wantNames    []string
		wantSubjects []string
		pusher       string
		wantKnownAs  string
	}{
		{name: "a token", p: identity.OfToken("ci", identity.ViaToken), wantNames: []string{"ci"}, wantSubjects: []string{"token:ci"},
			pusher: "CI", wantKnownAs: "ci"},
		{name: "a token's session", p: identity.OfToken("alice", identity.ViaSession), wantNames: []string{"alice"}, wantSubjects: []string{"token:alice"},
			pusher: "bob", wantKnownAs: ""},
		{name: "anonymous", p: identity.Anonymous, pusher: "anonymous", wantKnownAs: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.wantNames, tt.p.Names()); diff != "" {
				t.Errorf("Names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSubjects, tt.p.Subjects()); diff != "" {
				t.Errorf("Subjects (-want +got):\n%s", diff)
			}
			if got := tt.p.KnownAs(tt.pusher); got != tt.wantKnownAs {
				t.Errorf("KnownAs(%q) = %q, want %q", tt.pusher, got, tt.wantKnownAs)
			}
		})
	}
}
