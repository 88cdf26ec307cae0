package rollout

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Approvers are people (docs/design/identity.md, "Approvers are people"):
// an approval of a wave counts only from a principal that is not
// automation, that the wave's ApprovalsFrom names (by a group of its, or as
// a user by one of its names), and, with SeparationOfDuties, that did not
// push the rollout's version: none of its names (identity.Principal.Names:
// its email, its username at the provider, its subject) is PushedBy, the
// login the webhook names, case aside. A manual verdict of "valid" on
// a cluster (Flagger's confirm-promotion gate, POST /rollouts/{id}/approval)
// promotes the canary there: it is an approval of the wave the cluster is
// in, held to the same rule (VerdictRefused).

// ApprovalRefused says why p's approval of wave w of r does not count, ""
// when it does. The API refuses such an approval (403) before it is
// journaled: it changes nothing.
func (r *Rollout) ApprovalRefused(w int, p identity.Principal) string {
	if w < 0 || w >= len(r.Waves) {
		return ""
	}
	wave := r.Waves[w]
	name, pusher := p.Name, ""
	if wave.SeparationOfDuties && r.PushedBy != "" {
		pusher = p.KnownAs(r.PushedBy)
	}
	switch {
	case p.Automation:
		return fmt.Sprintf("%s is automation and never counts as an approver", name)
	case len(wave.ApprovalsFrom) > 0 && !approverIn(p, wave.ApprovalsFrom):
		return fmt.Sprintf("%s is not among those who may approve wave %d (%s): %s", name, w+1, wave.Name, strings.Join(wave.ApprovalsFrom, ", "))
	case pusher == name && pusher != "":
		return fmt.Sprintf("%s pushed %s and may not approve its rollout (separationOfDuties)", name, r.Tag)
	case pusher != "":
		return fmt.Sprintf("%s is %s, who pushed %s, and may not approve its rollout (separationOfDuties)", name, pusher, r.Tag)
	}
	return ""
}

// VerdictRefused says why p's manual verdict promoting the canary in
// cluster ("" for every cluster of r) does not count, "" when it does:
// the approval rule (ApprovalRefused) of each wave that names approvers
// (approvals) and holds the cluster. A wave that needs no approval holds
// the verdict to the route's permission only (approve), as before; a
// rejection (the verdict "invalid", a rollback) is not an approval and is
// never asked this.
func (r *Rollout) VerdictRefused(cluster string, p identity.Principal) string {
	for w, wave := range r.Waves {
		if wave.Approvals == 0 || cluster != "" && !slices.ContainsFunc(wave.Clusters, func(c Cluster) bool { return c.Name == cluster }) {
			continue
		}
		if why := r.ApprovalRefused(w, p); why != "" {
			return why
		}
	}
	return ""
}

// approverIn says whether p is one of from: group:<name> among its groups,
// user:<name> one of its names (identity.Principal.Names).
func approverIn(p identity.Principal, from []string) bool {
	for _, s := range from {
		kind, name, _ := strings.Cut(s, ":")
		switch kind {
		case "group":
			if slices.Contains(p.Groups, name) {
				return true
			}
		case "user":
			if slices.Contains(p.Names(), name) {
				return true
			}
		}
	}
	return false
}
