package app

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// server.sso reaches the API's single sign-on field by field: scopes and
// offlineAccess among them (a field dropped here would be accepted and
// ignored).
func TestSSOConfig(t *testing.T) {
	c := &config.SSO{Issuer: "https://login.example.com", ClientID: "flotilla", ClientSecretValue: "s3cret", CLIClientID: "flotilla-cli",
		GroupsClaim: "roles", UsernameClaim: "upn", SessionTTL: config.Duration{Duration: time.Hour}, OfflineAccess: ptr.To(false),
		Scopes: []string{"openid", "email", "team"}}
	want := api.SSOConfig{Issuer: "https://login.example.com", ClientID: "flotilla", ClientSecret: "s3cret", CLIClientID: "flotilla-cli",
		GroupsClaim: "roles", UsernameClaim: "upn", SessionTTL: time.Hour, NoOfflineAccess: true, Scopes: []string{"openid", "email", "team"},
		RedirectURL: "https://cd.example.com/flotilla/auth/callback"}
	if diff := cmp.Diff(want, ssoConfig(c, "https://cd.example.com/flotilla")); diff != "" {
		t.Errorf("ssoConfig (-want +got):\n%s", diff)
	}
}
