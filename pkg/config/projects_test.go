package config

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const projectsApps = `
applications:
  - {name: shop, image: registry.example.com/demo/shop, workload: {name: shop}, service: {port: 9898}}
  - {name: cart, image: registry.example.com/demo/cart, workload: {name: cart}, service: {port: 9898}}
`

const projectsServer = "server: {apiTokens: [{name: ci, secret: {env: FLOTILLA_TEST_TOKEN}, groups: [release]}, {name: ops, secret: {env: FLOTILLA_TEST_TOKEN}}]}\n"

// projects, rbac and apiTokens[].groups: every problem names its field.
func TestProjects(t *testing.T) {
	tests := []struct {
		name, server, extra string
		want                []string
	}{
		{"valid", projectsServer, `
projects:
  - name: a
    applications: [shop]
    roles:
      - {name: viewer, subjects: [group:release, user:alice]}
      - {name: pausers, permissions: [read, pause], subjects: [token:ops]}
      - {name: deployer, subjects: [token:ci]}
rbac:
  policy: |
    # a custom role
    p, role:deployer, rollouts, resume, a/*, allow
    g, token:ops, role:admin, *
    p, group:release, *, *, default/cart, deny
  defaultRole: viewer
`, nil},
		{"no projects, no rbac, no groups", "server: {apiTokens: [{name: ci, secret: {env: FLOTILLA_TEST_TOKEN}}]}\n", "", nil},
		{"groups need projects or rbac", projectsServer, "", []string{
			"server.apiTokens[0].groups: no projects and no rbac grant anything to groups: every token may do everything; set projects: or rbac:, or remove groups"}},
		{"projects", projectsServer, `
projects:
  - name: A
    applications: [shop, nope]
  - name: b
    applications: [shop]
    roles:
      - {name: viewer, permissions: [read], subjects: [group:x]}
      - {name: mine, subjects: [token:nobody]}
      - {name: mine2, permissions: [stop-line, fly], subjects: [people:x, "group:"]}
      - {name: mine3, permissions: [read]}
`, []string{
			`projects[0].name: invalid project name "A": want at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit`,
			`projects[0].applications[1]: no application "nope" is configured`,
			`projects[1].applications[0]: application "shop" is in project A already: an application belongs to one project`,
			`projects[1].roles[0].permissions: role viewer is built in ([read]): leave permissions out, or give the role another name`,
			`projects[1].roles[1].permissions: required: role mine is neither built in (viewer, operator, approver, admin) nor defined by rbac.policy (p, role:mine, ...)`,
			`projects[1].roles[1].subjects[0]: no API token "nobody" is configured (server.apiTokens)`,
			`projects[1].roles[2].permissions[0]: stop-line is fleet-wide, not a project's: grant role admin in every project (rbac.policy: g, <subject>, role:admin, *)`,
			`projects[1].roles[2].permissions[1]: unknown permission "fly"; want one of [read pause resume retry refresh abort approve override rollback quarantine]`,
			`projects[1].roles[2].subjects[0]: "people:x": want group:<name>, user:<name> or token:<name>`,
			`projects[1].roles[2].subjects[1]: "group:": a group name without spaces or commas after group:`,
			`projects[1].roles[3].subjects: required: group:<name>, user:<name> or token:<name>`,
		}},
		{"policy", projectsServer, `
rbac:
  policy: |
    p, role:x, rollout, pause, a/*, allow
    p, role:x, applications, pause, nope/*, maybe
    p, role:x, *, fly, */nope
    g, group:x, admin, b
    x, y
  defaultRole: role:viewer
`, []string{"rbac.policy: line 5: want \"p, <subject>, <resource>, <permission>, <project>/<application>[, allow|deny]\" or \"g, <subject>, role:<name>, <project>|*\"",
			"rbac.defaultRole: name the role without role: (such as viewer)"}},
		{"policy lines", projectsServer, `
rbac:
  policy: |
    p, role:x, rollout, pause, a/*, allow
    p, role:x, applications, pause, nope/*, maybe
    p, role:x, *, fly, */nope
    g, group:x, admin, b
  defaultRole: role:viewer
`, []string{
			`rbac.policy: line 1: unknown resource "rollout"; want one of [rollouts applications fleet *]`,
			`rbac.policy: line 1: object "a/*": no project "a"`,
			`rbac.policy: line 2: permission pause is not of applications: it is of [rollouts]`,
			`rbac.policy: line 2: object "nope/*": no project "nope"`,
			`rbac.policy: line 2: effect "maybe": want allow or deny`,
			`rbac.policy: line 3: unknown permission "fly"; want one of [read pause resume retry refresh abort approve override rollback quarantine], [stop-line tokens] or *`,
			`rbac.policy: line 3: object "*/nope": no application "nope" is configured`,
			`rbac.policy: line 4: "admin": grant a role, role:<name>`,
			`rbac.policy: line 4: no project "b": want a project's name, or * for every project`,
			`rbac.defaultRole: name the role without role: (such as viewer)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("FLOTILLA_TEST_TOKEN", "t")
			cfg, err := Parse([]byte(sections{server: tt.server, applications: projectsApps}.doc()+tt.extra), testDir(t))
			var got []string
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				for _, p := range verr.Problems {
					got = append(got, p.String())
				}
			case err != nil:
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if err == nil && tt.name == "valid" {
				if diff := cmp.Diff([]any{"a", "default", true, ""}, []any{cfg.ProjectOf("shop"), cfg.ProjectOf("cart"), cfg.Authorizing(), cfg.RBACNotice()}); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
		})
	}
}

// config check's notice: no projects and no rbac let every token do
// everything.
func TestRBACNotice(t *testing.T) {
	t.Setenv("FLOTILLA_TEST_TOKEN", "t")
	cfg, err := Parse([]byte(sections{server: "server: {apiTokens: [{name: ci, secret: {env: FLOTILLA_TEST_TOKEN}}]}\n"}.doc()), testDir(t))
	if err != nil {
		t.Fatal(err)
	}
	want := "no projects and no rbac: every API token may read and do everything to every application (set projects: and rbac: to grant roles)"
	if diff := cmp.Diff(want, cfg.RBACNotice()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestExampleProjects loads config/example.yaml with its commented projects
// and rbac block uncommented: a valid config with the block's values.
func TestExampleProjects(t *testing.T) {
	const fleetDir = "/tmp/flotilla-fleet/"
	data, tmp := exampleFixture(t)
	var block []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case line == "# projects:":
			in = true
		case in && !strings.HasPrefix(line, "#"):
			in = false
		}
		if in {
			block = append(block, strings.TrimPrefix(strings.TrimPrefix(line, "#"), " "))
		}
	}
	if len(block) < 3 {
		t.Fatalf("found no commented projects block in example.yaml: %q", block)
	}
	doc := strings.ReplaceAll(string(data), fleetDir, tmp+"/") + "\n" + strings.Join(block, "\n") + "\n"
	c, err := Parse([]byte(doc), filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatalf("example.yaml with its projects block:\n%v", err)
	}
	want := []any{
		[]Project{{Name: "payments", Applications: []string{"podinfo"}, Roles: []ProjectRole{
			{Name: "viewer", Subjects: []string{"group:release-managers"}},
			{Name: "release-managers", Permissions: []string{"read", "approve"}, Subjects: []string{"group:release-managers", "user:alice@example.com"}},
			{Name: "pausers", Subjects: []string{"token:default"}},
		}}},
		&RBAC{Policy: "p, role:pausers, rollouts, pause, payments/*, allow\np, role:pausers, rollouts, read, payments/*, allow\ng, token:default, role:admin, *\n", DefaultRole: "viewer"},
		"payments", "default",
	}
	if diff := cmp.Diff(want, []any{c.Projects, c.RBAC, c.ProjectOf("podinfo"), c.ProjectOf("frontend")}); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// A release set is the unit of a project: a project lists the set's name,
// its members follow it; a member listed in another project than its set's
// is refused naming the set.
func TestReleaseSetProjects(t *testing.T) {
	dir := testDir(t)
	names := []string{"shop", "shop-migrate", "shop-api", "shop-frontend"}
	tests := []struct {
		name, projects, policy string
		want                   []Problem
		projectOf              []string // of names, when valid
	}{
		{name: "in no project", projectOf: []string{"default", "default", "default", "default"}},
		{
			name:      "the set listed: its members follow it",
			projects:  "  - {name: payments, applications: [shop]}\n",
			policy:    "rbac: {policy: 'p, user:ann, rollouts, approve, payments/shop, allow'}\n",
			projectOf: []string{"payments", "payments", "payments", "payments"},
		},
		{
			name:      "a member listed with its set",
			projects:  "  - {name: payments, applications: [shop, shop-api]}\n",
			projectOf: []string{"payments", "payments", "payments", "payments"},
		},
		{
			name:     "a member listed, its set in none",
			projects: "  - {name: payments, applications: [shop-api]}\n",
			want:     []Problem{{"projects[0].applications[0]", `"shop-api" is a member of release set shop, which is project default's: a set's members follow it; list the set "shop" in the project instead`}},
		},
		{
			name:     "a member listed in another project than its set",
			projects: "  - {name: payments, applications: [shop]}\n  - {name: web, applications: [cart, shop-frontend]}\n",
			want:     []Problem{{"projects[1].applications[1]", `"shop-frontend" is a member of release set shop, which is project payments's: a set's members follow it; list the set "shop" in the project instead`}},
		},
		{
			name:     "the set in two projects",
			projects: "  - {name: payments, applications: [shop]}\n  - {name: web, applications: [shop]}\n",
			want:     []Problem{{"projects[1].applications[0]", `application "shop" is in project payments already: an application belongs to one project`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			extra := "  - {name: cart, image: registry.example.com/demo/cart, workload: {name: cart}, service: {port: 9898}}\n"
			if tt.projects != "" {
				extra += "projects:\n" + tt.projects
			}
			doc := sections{applications: shopDoc{extra: extra + tt.policy}.String()}.doc()
			c, err := Parse([]byte(doc), dir)
			var got []Problem
			var verr *ValidationError
			switch {
			case errors.As(err, &verr):
				got = verr.Problems
			case err != nil:
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			var of []string
			for _, n := range names {
				of = append(of, c.ProjectOf(n))
			}
			if diff := cmp.Diff(tt.projectOf, of); diff != "" {
				t.Errorf("ProjectOf %v (-want +got):\n%s", names, diff)
			}
		})
	}
}
