package bootstrap

import (
	"fmt"
	"os"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// permissionsTable is the README's table of what flotilla may do in a
// cluster: one row per rule of its roles.
func permissionsTable() string {
	var b strings.Builder
	b.WriteString("| Role | Bound | API group | Resources | Verbs |\n|---|---|---|---|---|\n")
	for _, r := range []struct {
		name, bound string
		rules       []rbacv1.PolicyRule
	}{
		{ReaderRole, "cluster-wide", ReaderRules},
		{DeliverRole, "in each application namespace", DeliverRules},
		{DeliverRole, "in each namespace of a git application", []rbacv1.PolicyRule{InventoryRule}},
		{TektonRole, "in the Tekton executor's namespace", TektonRules},
	} {
		for _, rule := range r.rules {
			group := strings.Join(rule.APIGroups, ", ")
			if group == "" {
				group = "core"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", r.name, r.bound, group,
				strings.Join(rule.Resources, ", "), strings.Join(rule.Verbs, ", "))
		}
	}
	return b.String()
}

// The README's permissions table is the roles' rules.
func TestREADMEPermissions(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := permissionsTable(); !strings.Contains(string(b), want) {
		t.Errorf("README.md lacks the permissions table; want:\n%s", want)
	}
}
