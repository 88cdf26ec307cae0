package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// server.anonymousRead is read, and AuthNotice says what is insecure or
// refuses everything.
func TestAnonymousRead(t *testing.T) {
	tests := []struct {
		name, server string
		want         []any // AnonymousRead, AuthNotice
	}{
		{"no token", "", []any{false, "no API token is set: every API call and web UI page is refused (401); set server.apiTokens (or server.apiToken)"}},
		{"a token", "server: {apiTokens: [{name: ci, secret: {env: FLOTILLA_TEST_TOKEN}}]}\n", []any{false, ""}},
		{"reads open", "server: {anonymousRead: true, apiToken: {env: FLOTILLA_TEST_TOKEN}}\n",
			[]any{true, "server.anonymousRead is on: anyone who reaches flotilla reads its API and web UI without a token (insecure)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(sections{server: tt.server}.doc()), testDir(t))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, []any{cfg.Server.AnonymousRead, cfg.Server.AuthNotice()}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Parse([]byte(sections{server: "server: {anonymousRead: yes please}\n"}.doc()), testDir(t)); err == nil {
		t.Error("anonymousRead: yes please was taken")
	}
}
