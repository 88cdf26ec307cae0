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
// a user by its name or subject), and, with SeparationOfDuties, that did
// not push the rollout's version (PushedBy).

// ApprovalRefused says why p's approval of wave w of r does not count, ""
// when it does. The API refuses such an approval (403) before it is
// journaled: it changes nothing.
func (r *Rollout) ApprovalRefused(w int, p identity.Principal) string {
	if w < 0 || w >= len(r.Waves) {
		return ""
	}
	wave := r.Waves[w]
	name := p.Name
	switch {
	case p.Automation:
		return fmt.Sprintf("%s is automation and never counts as an approver", name)
	case len(wave.ApprovalsFrom) > 0 && !approverIn(p, wave.ApprovalsFrom):
		return fmt.Sprintf("%s is not among those who may approve wave %d (%s): %s", name, w+1, wave.Name, strings.Join(wave.ApprovalsFrom, ", "))
	case wave.SeparationOfDuties && r.PushedBy != "" && pushed(p, r.PushedBy):
		return fmt.Sprintf("%s pushed %s and may not approve its rollout (separationOfDuties)", name, r.Tag)
	}
	return ""
}

// approverIn says whether p is one of from: group:<name> among its groups,
// user:<name> its name or subject.
func approverIn(p identity.Principal, from []string) bool {
	for _, s := range from {
		kind, name, _ := strings.Cut(s, ":")
		switch kind {
		case "group":
			if slices.Contains(p.Groups, name) {
				return true
			}
		case "user":
			if name == p.Name || name == p.Subject {
				return true
			}
		}
	}
	return false
}

// pushed says whether p is the pusher a webhook named: its name or
// subject (a git host's login, a registry's user), case aside.
func pushed(p identity.Principal, pusher string) bool {
	return strings.EqualFold(p.Name, pusher) || p.Subject != "" && strings.EqualFold(p.Subject, pusher)
}
