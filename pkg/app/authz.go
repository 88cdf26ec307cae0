package app

import "github.com/flotilla-cd/flotilla/pkg/config"

// tokenGroups are the API tokens' groups by name (server.apiTokens[].groups),
// which their principals carry and the projects' roles grant to.
func tokenGroups(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for _, t := range cfg.Server.APITokens {
		if len(t.Groups) > 0 {
			out[t.Name] = t.Groups
		}
	}
	return out
}
