package app

import (
	"log/slog"

	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// newTokens is the registry of the created API tokens (#31 item 4): in
// the embedded store, or in scale-out mode the NATS KV's documents, which
// every replica watches.
func (s *Server) newTokens() *tokens.Registry {
	if s.scale != nil {
		return tokens.New(s.scale.docs, nil)
	}
	return tokens.New(s.store, nil)
}

// grantTokens serves the token routes and keeps az's grants of the
// created tokens current with the registry.
func (s *Server) grantTokens(az *authz.Authorizer, log *slog.Logger) {
	sums := map[string]string{}
	for name, secret := range s.cfg.Server.Tokens() {
		sums[name] = tokens.Sum(secret)
	}
	s.api.WithTokenAdmin(s.tokens, sums)
	s.tokens.OnChange(func(ts []tokens.Token) {
		if err := az.SetTokens(ts); err != nil {
			log.Error("granting the API tokens' roles", "error", err)
		}
	})
}
