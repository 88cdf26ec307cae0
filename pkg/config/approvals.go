package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Approvals is who must approve a wave before its clusters start
// (waves[].approvals, fleet.wavePolicy.approvals): written as a number
// (that many distinct people: any principal but automation) or as
// {required, from, separationOfDuties}.
type Approvals struct {
	// Required is how many distinct people must approve: 1 to 10 (the
	// number form takes 0: none).
	Required int `json:"required"`
	// From names who may approve: group:<name> (a principal's groups: an
	// OIDC groups claim, server.apiTokens[].groups) and user:<name> (a
	// principal's name or subject). Empty: anyone who is not automation.
	From []string `json:"from"`
	// SeparationOfDuties: whoever pushed the version (as the webhook's
	// sender names them: the rollout's pushedBy) may not approve its
	// rollout. A rollout whose pusher is unknown (a poll, a sender that
	// names no one) refuses no one for it. Default false.
	SeparationOfDuties bool `json:"separationOfDuties"`

	// Mapping: it was written as a mapping (required then must be set).
	// Set by decoding.
	Mapping bool `json:"-"`
}

// UnmarshalJSON reads the number or the mapping form; the mapping's
// unknown fields are refused (the schema check names them first).
func (a *Approvals) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		var n int
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("approvals: want a number of approvers or {required, from, separationOfDuties}: %w", err)
		}
		*a = Approvals{Required: n}
		return nil
	}
	type plain Approvals
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("approvals: %w", err)
	}
	*a = Approvals(p)
	a.Mapping = true
	return nil
}

// MarshalJSON writes the number form when it says everything.
func (a Approvals) MarshalJSON() ([]byte, error) {
	if len(a.From) == 0 && !a.SeparationOfDuties && !a.Mapping {
		return json.Marshal(a.Required)
	}
	type plain Approvals
	return json.Marshal(plain(a))
}

// ApprovalsOf is n approvals in the number form (from anyone who is not
// automation).
func ApprovalsOf(n int) *Approvals { return &Approvals{Required: n} }

// approvals checks a wave policy's approvals at path.
func (v *validator) approvals(path string, a *Approvals) {
	if a == nil {
		return
	}
	switch {
	case a.Mapping && (a.Required < 1 || a.Required > 10):
		v.addf(path+".required", "%d is out of range: want 1 to 10 distinct approvers (or write approvals: 0 for none)", a.Required)
	case !a.Mapping && (a.Required < 0 || a.Required > 10):
		v.addf(path, "%d is out of range: want 0 to 10 distinct approvers", a.Required)
	}
	users, groups := map[string]bool{}, 0
	for i, s := range a.From {
		p := fmt.Sprintf("%s.from[%d]", path, i)
		kind, name, ok := strings.Cut(s, ":")
		switch {
		case !ok || (kind != "group" && kind != "user"):
			v.addf(p, "%q: want group:<name> or user:<name>", s)
		case name == "" || strings.ContainsAny(name, ", \t\n"):
			v.addf(p, "%q: want a %s name without spaces or commas after %s:", s, kind, kind)
		case kind == "group":
			groups++
		case users[name]:
			v.addf(p, "%q is listed twice", s)
		default:
			users[name] = true
		}
	}
	if groups == 0 && len(users) > 0 && len(users) < a.Required {
		v.addf(path+".from", "names %d users and no group: %d distinct approvals can never be given", len(users), a.Required)
	}
}
