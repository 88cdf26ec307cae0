package app

import (
	"log/slog"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/config"
)

// useSSO turns on single sign-on (server.sso): the Authn takes its
// sessions and the CLI's ID tokens, the UI's login page offers it, and
// routes registers /auth/*. Its sessions are documents of the state port:
// the store, or the NATS KV in scale-out mode (every replica reads them).
func (s *Server) useSSO(cfg *config.Config, log *slog.Logger) {
	c := cfg.Server.SSO
	if c == nil {
		return
	}
	s.sso = api.NewSSO(ssoConfig(c, s.externalURL), s.documents(), log)
	s.authn.UseSSO(s.sso)
	s.ui.WithSSO()
}

// ssoConfig is the API's single sign-on of server.sso, whose defaults
// Load filled, flotilla reached at externalURL.
func ssoConfig(c *config.SSO, externalURL string) api.SSOConfig {
	return api.SSOConfig{
		Issuer: c.Issuer, ClientID: c.ClientID, ClientSecret: c.ClientSecretValue, CLIClientID: c.CLIClientID,
		GroupsClaim: c.GroupsClaim, UsernameClaim: c.UsernameClaim, SessionTTL: c.SessionTTL.Duration, NoOfflineAccess: !c.AsksOfflineAccess(),
		Scopes: c.Scopes, RedirectURL: config.SSORedirectURL(externalURL),
	}
}

// documents is the state port's documents the web sessions are kept in:
// the store, or the NATS KV in scale-out mode (every replica reads them).
func (s *Server) documents() api.SSOSessions {
	if s.scale != nil {
		return s.scale.docs
	}
	return s.store
}
