package identity

import (
	"slices"
	"strings"
)

// Permission is what a principal may do, per project (docs/design/identity.md,
// "Projects and roles"). The API's route table names the one each route
// needs; the audit records name the same actions.
type Permission string

// The permissions.
const (
	Read       Permission = "read"       // every GET: rollouts, applications, the fleet map, the watch stream
	Pause      Permission = "pause"      // pause a rollout
	Resume     Permission = "resume"     // resume it
	Retry      Permission = "retry"      // retry what failed
	Refresh    Permission = "refresh"    // poll an application's registry now
	Abort      Permission = "abort"      // abort a rollout
	Approve    Permission = "approve"    // a manual verdict, a wave's approval
	Override   Permission = "override"   // override a freeze window
	Rollback   Permission = "rollback"   // roll a succeeded rollout back
	Quarantine Permission = "quarantine" // mark a version bad
	// StopLine stops and starts the line: fleet-wide, never per project.
	StopLine Permission = "stop-line"
	// ManageTokens creates, lists and revokes API tokens (pkg/tokens):
	// fleet-wide, as admin granted in every project ("*") holds it.
	ManageTokens Permission = "tokens"
)

// FleetPermissions are the fleet-wide permissions, in the order they are
// shown.
var FleetPermissions = []Permission{StopLine, ManageTokens}

// ProjectPermissions are the permissions granted per project, in the
// order they are shown.
var ProjectPermissions = []Permission{Read, Pause, Resume, Retry, Refresh, Abort, Approve, Override, Rollback, Quarantine}

// Resources a permission is about, as casbin policies name them
// ("p, role:x, <resource>, <permission>, <project>/<application>").
const (
	ResourceRollouts     = "rollouts"
	ResourceApplications = "applications"
	ResourceFleet        = "fleet"
)

// Resources of each permission: read is of rollouts and applications,
// refresh and quarantine of applications, stop-line of the fleet, the
// rest of rollouts.
func (p Permission) Resources() []string {
	switch p {
	case Read:
		return []string{ResourceRollouts, ResourceApplications}
	case Refresh, Quarantine:
		return []string{ResourceApplications}
	case StopLine, ManageTokens:
		return []string{ResourceFleet}
	}
	return []string{ResourceRollouts}
}

// Known says whether p is a permission.
func (p Permission) Known() bool {
	return slices.Contains(FleetPermissions, p) || slices.Contains(ProjectPermissions, p)
}

// Built-in roles, granted per project; admin granted fleet-wide ("*")
// also stops and starts the line.
var BuiltinRoles = map[string][]Permission{
	"viewer":   {Read},
	"operator": {Read, Pause, Resume, Retry, Refresh, Abort},
	"approver": {Read, Approve},
	"admin":    ProjectPermissions,
}

// Kinds of subject a role is granted to: "group:<name>", "user:<name>",
// "token:<name>".
const (
	SubjectGroup = "group:"
	SubjectUser  = "user:"
	SubjectToken = "token:"
)

// Subjects are the names p is known by to the policy: its token's
// ("token:ci"), or each of a person's Names as a user ("user:<name>"),
// then each of its groups.
func (p Principal) Subjects() []string {
	var out []string
	if p.Token != "" {
		out = append(out, SubjectToken+p.Token)
	} else {
		for _, n := range p.Names() {
			out = append(out, SubjectUser+n)
		}
	}
	for _, g := range p.Groups {
		out = append(out, SubjectGroup+g)
	}
	return out
}

// ValidSubject says why s is not a subject ("" if it is).
func ValidSubject(s string) string {
	for _, kind := range []string{SubjectGroup, SubjectUser, SubjectToken} {
		if name, ok := strings.CutPrefix(s, kind); ok {
			if name == "" || strings.ContainsAny(name, ", \t\n") {
				return "a " + strings.TrimSuffix(kind, ":") + " name without spaces or commas after " + kind
			}
			return ""
		}
	}
	return "want group:<name>, user:<name> or token:<name>"
}
