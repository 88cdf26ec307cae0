package config

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Project is a set of applications and the roles granted in it
// (docs/design/identity.md, "Projects and roles"; pkg/authz).
// Applications no project lists belong to the project DefaultProject.
type Project struct {
	// Name of the project: a DNS label, unique. "default" may be named to
	// grant roles in it (it holds the applications no project lists).
	Name string `json:"name"`
	// Applications are the names of configured applications, each in at
	// most one project. With server.resources a name may be absent (an
	// Application resource not applied yet, or deleted). A release set is
	// listed by its name (releaseSets[].name): its members follow it, and
	// a member listed in another project than its set's is refused.
	Applications []string `json:"applications"`
	// Namespaces are the management cluster's namespaces whose Application
	// resources (server.resources) are this project's applications, each
	// namespace in at most one project: a team's namespace decides its
	// applications' project. An Application resource another project lists
	// by name is refused (reason ProjectConflict) unless its namespace is
	// that project's (or the listing project names no namespace).
	Namespaces []string `json:"namespaces"`
	// Roles are granted in this project only.
	Roles []ProjectRole `json:"roles"`
}

// ProjectRole grants permissions in a project to subjects.
type ProjectRole struct {
	// Name of the role: a built-in one (viewer, operator, approver,
	// admin: its permissions are fixed, Permissions must be empty), one
	// rbac.policy defines ("p, role:<name>, ..."), or a new one with
	// Permissions. A DNS label, unique in the project.
	Name string `json:"name"`
	// Permissions of a role that is not built in: read, pause, resume,
	// retry, refresh, abort, approve, override, rollback, quarantine.
	Permissions []string `json:"permissions"`
	// Subjects the role is granted to: group:<name> (an API token's
	// groups, server.apiTokens[].groups), user:<name>, token:<name> (a
	// configured API token). At least one.
	Subjects []string `json:"subjects"`
}

// RBAC is the policy on top of the projects' roles.
type RBAC struct {
	// Policy is casbin CSV, as Argo CD's policy.csv: "p, <subject>,
	// <resource>, <permission>, <project>/<application>[, allow|deny]"
	// (resource rollouts, applications, fleet or *; permission or *;
	// object with * for any) and "g, <subject>, role:<name>, <project>|*"
	// (a role granted in a project, or in every project with *; admin
	// granted with * also stops and starts the line). Lines starting
	// with # are comments.
	Policy string `json:"policy"`
	// DefaultRole is a role every authenticated principal has in every
	// project: a built-in one, or one the policy or a project defines. ""
	// (default): none.
	DefaultRole string `json:"defaultRole"`
}

// DefaultProject holds the applications no project lists.
const DefaultProject = "default"

// Authorizing says whether the projects' roles and rbac decide what each
// principal may do; without projects and rbac every authenticated
// principal may do everything (as before #31's projects).
func (c *Config) Authorizing() bool { return len(c.Projects) > 0 || c.RBAC != nil }

// ProjectOf is the project application app belongs to: the one listing
// it, else the one whose namespaces have its Application resource; a
// release set's member is its set's.
func (c *Config) ProjectOf(app string) string {
	if s := c.SetOf(app); s != "" {
		app = s
	}
	for _, p := range c.Projects {
		if slices.Contains(p.Applications, app) {
			return p.Name
		}
	}
	if a, ok := c.Application(app); ok && a.ResourceNamespace != "" {
		if p := c.projectOfNamespace(a.ResourceNamespace); p >= 0 {
			return c.Projects[p].Name
		}
	}
	return DefaultProject
}

// projectOfNamespace is the index of the project whose namespaces have
// ns, -1 when none.
func (c *Config) projectOfNamespace(ns string) int {
	return slices.IndexFunc(c.Projects, func(p Project) bool { return slices.Contains(p.Namespaces, ns) })
}

// ProblemProjectConflict begins the problem of an Application resource
// another project lists (pkg/resources says ProjectConflict).
const ProblemProjectConflict = "project conflict: "

// resourcesInProjects checks the projects' namespaces and the projects of
// the Application resources' applications (ResourceNamespace set): one a
// project lists by name must be in that project's namespaces, when its
// namespace is another project's or the listing project names namespaces.
func (v *validator) resourcesInProjects(c *Config) {
	owner := map[string]string{}
	for i, p := range c.Projects {
		for j, ns := range p.Namespaces {
			path := fmt.Sprintf("projects[%d].namespaces[%d]", i, j)
			v.dnsLabel(path, "namespace", ns)
			switch {
			case c.Server.Resources == nil:
				v.addf(path, "a project's namespaces are those of the Application resources: set server.resources")
			case owner[ns] != "":
				v.addf(path, "namespace %q is project %s's already: a namespace belongs to one project", ns, owner[ns])
			default:
				owner[ns] = p.Name
			}
		}
	}
	for k, a := range c.Applications {
		if a.ResourceNamespace == "" {
			continue
		}
		q := slices.IndexFunc(c.Projects, func(p Project) bool { return slices.Contains(p.Applications, a.Name) })
		if q < 0 || slices.Contains(c.Projects[q].Namespaces, a.ResourceNamespace) {
			continue
		}
		lister := c.Projects[q]
		switch p := c.projectOfNamespace(a.ResourceNamespace); {
		case p >= 0:
			v.addf(fmt.Sprintf("applications[%d].metadata.namespace", k), "%sproject %q lists the application %q (projects[%d].applications), but its namespace %s is project %q's: a team may not place its application in another team's project",
				ProblemProjectConflict, lister.Name, a.Name, q, a.ResourceNamespace, c.Projects[p].Name)
		case len(lister.Namespaces) > 0:
			v.addf(fmt.Sprintf("applications[%d].metadata.namespace", k), "%sproject %q lists the application %q (projects[%d].applications), but its namespace %s is not among the project's namespaces %v",
				ProblemProjectConflict, lister.Name, a.Name, q, a.ResourceNamespace, lister.Namespaces)
		}
	}
}

// RBACNotice says, "" when it need not, that every authenticated
// principal may do everything: no projects and no rbac.
func (c *Config) RBACNotice() string {
	if c.Authorizing() || len(c.Server.Tokens()) == 0 {
		return ""
	}
	return "no projects and no rbac: every API token may read and do everything to every application (set projects: and rbac: to grant roles)"
}

// PolicyLine is one line of rbac.policy: "p" (Subject, Resource,
// Permission, Object, Effect) or "g" (Subject, Role, Domain).
type PolicyLine struct {
	Line                                  int // from 1
	Kind                                  string
	Subject, Resource, Permission, Object string
	Effect                                string // allow (default) or deny
	Role, Domain                          string
}

// Lines parses rbac.policy (nil for none); its error names the line.
func (r *RBAC) Lines() ([]PolicyLine, error) {
	if r == nil || strings.TrimSpace(r.Policy) == "" {
		return nil, nil
	}
	cr := csv.NewReader(strings.NewReader(r.Policy))
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	var out []PolicyLine
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		for i := range rec {
			rec[i] = strings.TrimSpace(rec[i])
		}
		switch {
		case rec[0] == "p" && (len(rec) == 5 || len(rec) == 6):
			l := PolicyLine{Line: line, Kind: "p", Subject: rec[1], Resource: rec[2], Permission: rec[3], Object: rec[4], Effect: "allow"}
			if len(rec) == 6 {
				l.Effect = rec[5]
			}
			out = append(out, l)
		case rec[0] == "g" && len(rec) == 4:
			out = append(out, PolicyLine{Line: line, Kind: "g", Subject: rec[1], Role: rec[2], Domain: rec[3]})
		default:
			return nil, fmt.Errorf("line %d: want \"p, <subject>, <resource>, <permission>, <project>/<application>[, allow|deny]\" or \"g, <subject>, role:<name>, <project>|*\"", line)
		}
	}
}

// projects checks projects and rbac against the applications and the
// API tokens.
func (v *validator) projects(c *Config) {
	apps := map[string]bool{}
	for _, a := range c.Applications {
		apps[a.Name] = true
	}
	for _, s := range c.ReleaseSets {
		apps[s.Name] = true // a set's rollouts are named after it
	}
	tokens := map[string]bool{}
	if c.Server.APIToken != nil {
		tokens[DefaultTokenName] = true
	}
	for _, t := range c.Server.APITokens {
		tokens[t.Name] = true
	}
	lines, err := c.RBAC.Lines()
	if err != nil {
		v.addf("rbac.policy", "%v", err)
	}
	policyRoles := map[string]bool{} // role names the policy gives permissions to
	for _, l := range lines {
		if r, ok := strings.CutPrefix(l.Subject, "role:"); ok && l.Kind == "p" {
			policyRoles[r] = true
		}
	}
	projects := map[string]string{}
	inProject := map[string]string{}
	roleNames := map[string]bool{}
	for i, p := range c.Projects {
		path := fmt.Sprintf("projects[%d]", i)
		v.name(path, "project", p.Name, projects)
		for j, a := range p.Applications {
			ap := fmt.Sprintf("%s.applications[%d]", path, j)
			switch {
			case !apps[a] && c.Server.Resources == nil:
				v.addf(ap, "no application %q is configured", a)
			case inProject[a] != "":
				v.addf(ap, "application %q is in project %s already: an application belongs to one project", a, inProject[a])
			default:
				inProject[a] = p.Name
			}
		}
		seen := map[string]string{}
		for j, r := range p.Roles {
			rp := fmt.Sprintf("%s.roles[%d]", path, j)
			v.name(rp, "role", r.Name, seen)
			roleNames[r.Name] = true
			_, builtin := identity.BuiltinRoles[r.Name]
			switch {
			case builtin && len(r.Permissions) > 0:
				v.addf(rp+".permissions", "role %s is built in (%v): leave permissions out, or give the role another name", r.Name, identity.BuiltinRoles[r.Name])
			case !builtin && len(r.Permissions) == 0 && !policyRoles[r.Name]:
				v.addf(rp+".permissions", "required: role %s is neither built in (viewer, operator, approver, admin) nor defined by rbac.policy (p, role:%s, ...)", r.Name, r.Name)
			}
			for k, perm := range r.Permissions {
				pp := fmt.Sprintf("%s.permissions[%d]", rp, k)
				switch pm := identity.Permission(perm); {
				case slices.Contains(identity.FleetPermissions, pm):
					v.addf(pp, "%s is fleet-wide, not a project's: grant role admin in every project (rbac.policy: g, <subject>, role:admin, *)", pm)
				case !pm.Known():
					v.addf(pp, "unknown permission %q; want one of %v", perm, identity.ProjectPermissions)
				}
			}
			if len(r.Subjects) == 0 {
				v.addf(rp+".subjects", "required: group:<name>, user:<name> or token:<name>")
			}
			for k, s := range r.Subjects {
				v.subject(fmt.Sprintf("%s.subjects[%d]", rp, k), s, tokens)
			}
		}
	}
	v.membersInProjects(c, inProject)
	projects[DefaultProject] = "the applications no project lists"
	for _, l := range lines {
		v.policyLine(l, projects, apps, tokens)
	}
	if r := c.RBAC; r != nil && r.DefaultRole != "" {
		_, builtin := identity.BuiltinRoles[r.DefaultRole]
		switch {
		case strings.HasPrefix(r.DefaultRole, "role:"):
			v.addf("rbac.defaultRole", "name the role without role: (such as viewer)")
		case !builtin && !policyRoles[r.DefaultRole] && !roleNames[r.DefaultRole]:
			v.addf("rbac.defaultRole", "unknown role %q: want viewer, operator, approver, admin, or a role rbac.policy or a project defines", r.DefaultRole)
		}
	}
	for i, t := range c.Server.APITokens {
		for j, g := range t.Groups {
			if msg := identity.ValidSubject(identity.SubjectGroup + g); msg != "" {
				v.addf(fmt.Sprintf("server.apiTokens[%d].groups[%d]", i, j), "%q: %s", g, msg)
			}
		}
		if len(t.Groups) > 0 && !c.Authorizing() {
			v.addf(fmt.Sprintf("server.apiTokens[%d].groups", i), "no projects and no rbac grant anything to groups: every token may do everything; set projects: or rbac:, or remove groups")
		}
	}
}

// membersInProjects refuses a release set's member that a project lists
// while its set is another project's (inProject: the project listing each
// name, the set's included): the set is the unit of a project, its
// members follow it.
func (v *validator) membersInProjects(c *Config, inProject map[string]string) {
	for i, p := range c.Projects {
		for j, a := range p.Applications {
			set := c.SetOf(a)
			if set == "" || inProject[a] != p.Name {
				continue
			}
			if sp := cmpOr(inProject[set], DefaultProject); sp != p.Name {
				v.addf(fmt.Sprintf("projects[%d].applications[%d]", i, j), "%q is a member of release set %s, which is project %s's: a set's members follow it; list the set %q in the project instead",
					a, set, sp, set)
			}
		}
	}
}

// subject checks a subject a role is granted to; a token must be one
// configured.
func (v *validator) subject(path, s string, tokens map[string]bool) {
	if msg := identity.ValidSubject(s); msg != "" {
		v.addf(path, "%q: %s", s, msg)
		return
	}
	if t, ok := strings.CutPrefix(s, identity.SubjectToken); ok && !tokens[t] {
		v.addf(path, "no API token %q is configured (server.apiTokens)", t)
	}
}

var policyResources = []string{identity.ResourceRollouts, identity.ResourceApplications, identity.ResourceFleet, "*"}

// policyLine checks one line of rbac.policy.
func (v *validator) policyLine(l PolicyLine, projects map[string]string, apps, tokens map[string]bool) {
	path := fmt.Sprintf("rbac.policy: line %d", l.Line)
	subject := func(s string) {
		if strings.HasPrefix(s, "role:") {
			if strings.TrimPrefix(s, "role:") == "" {
				v.addf(path, "a role needs a name after role:")
			}
			return
		}
		v.subject(path, s, tokens)
	}
	if l.Kind == "g" {
		subject(l.Subject)
		if !strings.HasPrefix(l.Role, "role:") || l.Role == "role:" {
			v.addf(path, "%q: grant a role, role:<name>", l.Role)
		}
		if _, ok := projects[l.Domain]; !ok && l.Domain != "*" {
			v.addf(path, "no project %q: want a project's name, or * for every project", l.Domain)
		}
		return
	}
	subject(l.Subject)
	if !slices.Contains(policyResources, l.Resource) {
		v.addf(path, "unknown resource %q; want one of %v", l.Resource, policyResources)
	}
	if pm := identity.Permission(l.Permission); l.Permission != "*" {
		switch {
		case !pm.Known():
			v.addf(path, "unknown permission %q; want one of %v, %v or *", l.Permission, identity.ProjectPermissions, identity.FleetPermissions)
		case l.Resource != "*" && slices.Contains(policyResources, l.Resource) && !slices.Contains(pm.Resources(), l.Resource):
			v.addf(path, "permission %s is not of %s: it is of %v", l.Permission, l.Resource, pm.Resources())
		}
	}
	if l.Object != "*" {
		project, app, ok := strings.Cut(l.Object, "/")
		_, known := projects[project]
		switch {
		case !ok:
			v.addf(path, "object %q: want <project>/<application>, either of them *", l.Object)
		case project != "*" && !known:
			v.addf(path, "object %q: no project %q", l.Object, project)
		case app != "*" && !apps[app]:
			v.addf(path, "object %q: no application %q is configured", l.Object, app)
		}
	}
	if l.Effect != "allow" && l.Effect != "deny" {
		v.addf(path, "effect %q: want allow or deny", l.Effect)
	}
}
