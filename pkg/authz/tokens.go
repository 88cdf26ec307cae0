package authz

import (
	"fmt"
	"slices"
	"sync"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// grantedTokens are the subjects ("token:<name>") of the created tokens
// (pkg/tokens) the policy holds grants of: with no projects and rbac
// (open), they may do what their grants allow, not everything.
type grantedTokens struct {
	mu   sync.RWMutex
	subs map[string]bool
}

func (g *grantedTokens) has(p identity.Principal) bool {
	if p.Token == "" {
		return false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.subs[identity.SubjectToken+p.Token]
}

// RoleOf is the casbin role of role granted in project ("*": every
// project), and why it is none ("" if it is one): a built-in role, or one
// of the project's roles.
func (a *Authorizer) RoleOf(project, role string) (string, string) {
	if project != Fleet && project != config.DefaultProject && !slices.Contains(a.projects, project) {
		return "", fmt.Sprintf("no project %s", project)
	}
	if r, ok := a.roles[project][role]; ok {
		return r, ""
	}
	if _, ok := identity.BuiltinRoles[role]; ok {
		return "role:" + role, ""
	}
	return "", fmt.Sprintf("no role %s in project %s: want viewer, operator, approver, admin or one of the project's roles", role, project)
}

// SetTokens makes the grants of the created tokens ts (pkg/tokens) the
// policy's: each "token:<name>" holds its grants' roles in their projects,
// and nothing once revoked or expired (a revoked token is refused before
// any decision anyway). Config tokens' revocations are left out.
func (a *Authorizer) SetTokens(ts []tokens.Token) error {
	if a.enforcer == nil {
		return fmt.Errorf("no casbin enforcer")
	}
	a.granted.mu.Lock()
	defer a.granted.mu.Unlock()
	if a.granted.subs == nil {
		a.granted.subs = map[string]bool{}
	}
	for sub := range a.granted.subs {
		if _, err := a.enforcer.RemoveFilteredGroupingPolicy(0, sub); err != nil {
			return fmt.Errorf("removing the grants of %s: %w", sub, err)
		}
		delete(a.granted.subs, sub)
	}
	var grants [][]string
	for _, t := range ts {
		if t.Config {
			continue
		}
		sub := identity.SubjectToken + t.Name
		a.granted.subs[sub] = true // no grant, or revoked: nothing, even when open
		if t.RevokedAt != nil {
			continue
		}
		for _, g := range t.Grants {
			if role, why := a.RoleOf(g.Project, g.Role); why == "" {
				grants = append(grants, []string{sub, role, g.Project})
			}
		}
	}
	if len(grants) > 0 {
		if _, err := a.enforcer.AddGroupingPoliciesEx(grants); err != nil {
			return fmt.Errorf("adding the tokens' grants: %w", err)
		}
	}
	return nil
}
