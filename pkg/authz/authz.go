package authz

import (
	"fmt"
	"maps"
	"slices"

	"github.com/casbin/casbin/v2"
	"github.com/casbin/casbin/v2/model"
	"github.com/casbin/casbin/v2/util"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Model is the casbin model: RBAC with domains, the domain a project (or
// "*": every project, and the fleet's own permissions). A request is
// (subject, project, resource, permission, "<project>/<application>"); a
// policy line (subject, resource, permission, object, allow|deny), any of
// resource, permission and object ending in * matching what starts the
// same (keyMatch); a grant (subject, role, project or *). A deny wins.
const Model = `
[request_definition]
r = sub, dom, res, act, obj

[policy_definition]
p = sub, res, act, obj, eft

[role_definition]
g = _, _, _

[policy_effect]
e = some(where (p.eft == allow)) && !some(where (p.eft == deny))

[matchers]
m = g(r.sub, p.sub, r.dom) && keyMatch(r.res, p.res) && keyMatch(r.act, p.act) && keyMatch(r.obj, p.obj)
`

// Fleet is the domain (and object) of the fleet-wide permissions
// (stop-line): only a role granted in every project ("*") holds them.
const Fleet = "*"

// Authorizer answers whether a principal may do something.
type Authorizer struct {
	open      bool
	enforcer  *casbin.SyncedEnforcer
	projectOf map[string]string // application -> project
	projects  []string          // every project, "default" included, in order
	dflt      string            // "role:<rbac.defaultRole>", "" for none

	roles   map[string]map[string]string // project -> its own roles' names -> casbin role (tokens.go)
	granted grantedTokens                // the created tokens' subjects (tokens.go)
}

// Open is the authorizer of a config without projects and rbac: every
// authenticated principal may do everything, but a created token (pkg/tokens)
// only what its grants allow.
func Open() *Authorizer {
	a := &Authorizer{open: true}
	a.enforcer, _ = builtins() // a constant model: it loads
	return a
}

// builtins is the casbin enforcer of the model and the built-in roles.
func builtins() (*casbin.SyncedEnforcer, error) {
	m, err := model.NewModelFromString(Model)
	if err != nil {
		return nil, fmt.Errorf("loading the casbin model: %w", err)
	}
	e, err := casbin.NewSyncedEnforcer(m)
	if err != nil {
		return nil, fmt.Errorf("making the casbin enforcer: %w", err)
	}
	// A grant in "*" holds in every project (and for the fleet).
	e.AddNamedDomainMatchingFunc("g", "keyMatch", util.KeyMatch)
	var policies [][]string
	for _, name := range slices.Sorted(maps.Keys(identity.BuiltinRoles)) {
		for _, p := range identity.BuiltinRoles[name] {
			policies = append(policies, []string{"role:" + name, "*", string(p), "*/*", "allow"})
		}
	}
	policies = append(policies,
		[]string{"role:admin", identity.ResourceFleet, string(identity.StopLine), Fleet, "allow"},
		[]string{"role:admin", identity.ResourceFleet, string(identity.ManageTokens), Fleet, "allow"})
	if _, err := e.AddPoliciesEx(policies); err != nil {
		return nil, fmt.Errorf("adding the built-in roles: %w", err)
	}
	return e, nil
}

// New builds the authorizer of cfg (validated by config.Load): open
// without projects and rbac, else the casbin policy of the built-in roles,
// the projects' roles, the tokens' groups and rbac.policy.
func New(cfg *config.Config) (*Authorizer, error) {
	if !cfg.Authorizing() {
		return Open(), nil
	}
	e, err := builtins()
	if err != nil {
		return nil, err
	}
	a := &Authorizer{enforcer: e, projectOf: map[string]string{}, roles: map[string]map[string]string{}}
	for _, app := range cfg.Applications {
		a.projectOf[app.Name] = cfg.ProjectOf(app.Name)
	}
	var policies, grants [][]string
	seenDefault := false
	for _, p := range cfg.Projects {
		a.projects = append(a.projects, p.Name)
		seenDefault = seenDefault || p.Name == config.DefaultProject
		a.roles[p.Name] = map[string]string{}
		for _, r := range p.Roles {
			role := roleOf(p.Name, r)
			a.roles[p.Name][r.Name] = role
			for _, perm := range r.Permissions {
				policies = append(policies, []string{role, "*", perm, p.Name + "/*", "allow"})
			}
			for _, s := range r.Subjects {
				grants = append(grants, []string{s, role, p.Name})
			}
		}
	}
	if !seenDefault {
		a.projects = append(a.projects, config.DefaultProject)
	}
	for _, t := range cfg.Server.APITokens {
		for _, g := range t.Groups { // a token inherits its groups' roles (and denies)
			grants = append(grants, []string{identity.SubjectToken + t.Name, identity.SubjectGroup + g, "*"})
		}
	}
	lines, err := cfg.RBAC.Lines()
	if err != nil {
		return nil, fmt.Errorf("rbac.policy: %w", err)
	}
	for _, l := range lines {
		if l.Kind == "p" {
			policies = append(policies, []string{l.Subject, l.Resource, l.Permission, l.Object, l.Effect})
		} else {
			grants = append(grants, []string{l.Subject, l.Role, l.Domain})
		}
	}
	if _, err := e.AddPoliciesEx(policies); err != nil {
		return nil, fmt.Errorf("adding the policy: %w", err)
	}
	if _, err := e.AddGroupingPoliciesEx(grants); err != nil {
		return nil, fmt.Errorf("adding the grants: %w", err)
	}
	if cfg.RBAC != nil && cfg.RBAC.DefaultRole != "" {
		a.dflt = "role:" + cfg.RBAC.DefaultRole
	}
	return a, nil
}

// roleOf is the casbin role of a project's role: a built-in or
// policy-defined role by its name; one with its own permissions is the
// project's ("role:<project>:<name>"), so that two projects may define
// roles of one name differently.
func roleOf(project string, r config.ProjectRole) string {
	if len(r.Permissions) == 0 {
		return "role:" + r.Name
	}
	return "role:" + project + ":" + r.Name
}

// Open says whether every authenticated principal may do everything (no
// projects, no rbac).
func (a *Authorizer) Open() bool { return a.open }

// ProjectOf is the project of application app ("default" for one no
// project lists).
func (a *Authorizer) ProjectOf(app string) string {
	if p, ok := a.projectOf[app]; ok {
		return p
	}
	return config.DefaultProject
}

// Projects are every project, "default" included.
func (a *Authorizer) Projects() []string { return slices.Clone(a.projects) }

// Allowed says whether p may do perm to resource res of application app
// (its project's policy). Fleet-wide permissions (stop-line) take app "".
func (a *Authorizer) Allowed(p identity.Principal, res string, perm identity.Permission, app string) (bool, error) {
	if a.open && p.Authenticated() && !a.granted.has(p) {
		return true, nil
	}
	if !p.Authenticated() {
		// anonymousRead: reads, and nothing else.
		return p.Via == identity.ViaAnonymous && perm == identity.Read, nil
	}
	dom, obj := Fleet, Fleet
	if app != "" {
		dom = a.ProjectOf(app)
		obj = dom + "/" + app
	}
	return a.enforce(p, dom, res, perm, obj)
}

func (a *Authorizer) enforce(p identity.Principal, dom, res string, perm identity.Permission, obj string) (bool, error) {
	// Not while SetTokens replaces the tokens' grants (it removes them all,
	// then adds the new ones): a token would be refused in between.
	a.granted.mu.RLock()
	defer a.granted.mu.RUnlock()
	subjects := p.Subjects()
	if a.dflt != "" {
		subjects = append(subjects, a.dflt)
	}
	for _, s := range subjects {
		ok, err := a.enforcer.Enforce(s, dom, res, string(perm), obj)
		if err != nil {
			return false, fmt.Errorf("deciding whether %s may %s in %s: %w", s, perm, dom, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// Permissions are what p may do per project ("*" for the fleet-wide
// ones: stop-line), each project's in identity.ProjectPermissions' order;
// a project where p may do nothing is left out. A permission counts when
// p holds it for every application of the project (a project's, not one
// application's, as rbac.policy may narrow it).
func (a *Authorizer) Permissions(p identity.Principal) (map[string][]identity.Permission, error) {
	out := map[string][]identity.Permission{}
	projects := a.projects
	if a.open {
		projects = []string{config.DefaultProject}
	}
	for _, project := range projects {
		for _, perm := range identity.ProjectPermissions {
			ok, err := a.allowedInProject(p, project, perm)
			if err != nil {
				return nil, err
			}
			if ok {
				out[project] = append(out[project], perm)
			}
		}
	}
	for _, perm := range identity.FleetPermissions {
		ok, err := a.Allowed(p, identity.ResourceFleet, perm, "")
		if err != nil {
			return nil, err
		}
		if ok {
			out[Fleet] = append(out[Fleet], perm)
		}
	}
	return out, nil
}

// allowedInProject says whether p holds perm on its first resource in
// project: for every application of the project if it has any.
func (a *Authorizer) allowedInProject(p identity.Principal, project string, perm identity.Permission) (bool, error) {
	res := perm.Resources()[0]
	if (a.open && !a.granted.has(p)) || !p.Authenticated() {
		return a.Allowed(p, res, perm, "")
	}
	var apps []string
	for app, in := range a.projectOf {
		if in == project {
			apps = append(apps, app)
		}
	}
	if len(apps) == 0 {
		apps = []string{"*"}
	}
	for _, app := range apps {
		if ok, err := a.enforce(p, project, res, perm, project+"/"+app); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
