package authz_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// fleetConfig: applications shop and ledger in project a, cart in b, misc
// in none (default); roles granted to tokens, a group, and by rbac.policy.
func fleetConfig(policy, defaultRole string) *config.Config {
	return &config.Config{
		Server: config.Server{APITokens: []config.APIToken{
			{Name: "view-a"}, {Name: "op-a"}, {Name: "ci", Groups: []string{"release"}}, {Name: "root"}, {Name: "admin-a"}, {Name: "dep"},
		}},
		Applications: []config.Application{{Name: "shop"}, {Name: "ledger"}, {Name: "cart"}, {Name: "misc"}},
		Projects: []config.Project{
			{Name: "a", Applications: []string{"shop", "ledger"}, Roles: []config.ProjectRole{
				{Name: "viewer", Subjects: []string{"token:view-a"}},
				{Name: "operator", Subjects: []string{"token:op-a"}},
				{Name: "approver", Subjects: []string{"group:release"}},
				{Name: "admin", Subjects: []string{"token:admin-a"}},
			}},
			{Name: "b", Applications: []string{"cart"}, Roles: []config.ProjectRole{
				{Name: "pausers", Permissions: []string{"read", "pause"}, Subjects: []string{"user:alice"}},
				{Name: "deployer", Subjects: []string{"token:dep"}},
			}},
		},
		RBAC: &config.RBAC{Policy: policy, DefaultRole: defaultRole},
	}
}

const policy = `# custom role, granted in project b by the project's roles (deployer)
p, role:deployer, rollouts, resume, b/*, allow
p, role:deployer, rollouts, read, b/*
g, token:root, role:admin, *
p, group:release, rollouts, approve, a/ledger, deny
`

func tok(name string) identity.Principal { return identity.OfToken(name, identity.ViaToken) }

func TestAllowed(t *testing.T) {
	a, err := authz.New(fleetConfig(policy, ""))
	if err != nil {
		t.Fatal(err)
	}
	withDefault, err := authz.New(fleetConfig(policy, "viewer"))
	if err != nil {
		t.Fatal(err)
	}
	alice := identity.Principal{Subject: "alice", Name: "alice", Via: identity.ViaSession}
	ci := tok("ci")
	ci.Groups = []string{"release"}
	type ask struct {
		who  identity.Principal
		res  string
		perm identity.Permission
		app  string
	}
	tests := []struct {
		name string
		a    *authz.Authorizer
		ask  ask
		want bool
	}{
		{"a viewer reads its project's", a, ask{tok("view-a"), "rollouts", identity.Read, "shop"}, true},
		{"a viewer reads no other project's", a, ask{tok("view-a"), "rollouts", identity.Read, "cart"}, false},
		{"a viewer does not pause", a, ask{tok("view-a"), "rollouts", identity.Pause, "shop"}, false},
		{"an operator pauses", a, ask{tok("op-a"), "rollouts", identity.Pause, "ledger"}, true},
		{"an operator refreshes", a, ask{tok("op-a"), "applications", identity.Refresh, "shop"}, true},
		{"an operator does not approve", a, ask{tok("op-a"), "rollouts", identity.Approve, "shop"}, false},
		{"an operator pauses no other project's", a, ask{tok("op-a"), "rollouts", identity.Pause, "cart"}, false},
		{"nor the default project's", a, ask{tok("op-a"), "rollouts", identity.Pause, "misc"}, false},
		{"a group's role", a, ask{ci, "rollouts", identity.Approve, "shop"}, true},
		{"a token inherits its configured groups", a, ask{tok("ci"), "rollouts", identity.Approve, "shop"}, true},
		{"a deny wins", a, ask{ci, "rollouts", identity.Approve, "ledger"}, false},
		{"a project's own role", a, ask{alice, "rollouts", identity.Pause, "cart"}, true},
		{"not beyond its permissions", a, ask{alice, "rollouts", identity.Abort, "cart"}, false},
		{"a role of the policy", a, ask{tok("dep"), "rollouts", identity.Resume, "cart"}, true},
		{"only what the policy gives it", a, ask{tok("dep"), "rollouts", identity.Pause, "cart"}, false},
		{"only on the policy's resource", a, ask{tok("dep"), "applications", identity.Read, "cart"}, false},
		{"a project admin quarantines", a, ask{tok("admin-a"), "applications", identity.Quarantine, "shop"}, true},
		{"a project admin does not stop the line", a, ask{tok("admin-a"), "fleet", identity.StopLine, ""}, false},
		{"a fleet-wide admin stops the line", a, ask{tok("root"), "fleet", identity.StopLine, ""}, true},
		{"a fleet-wide admin overrides anywhere", a, ask{tok("root"), "rollouts", identity.Override, "misc"}, true},
		{"no role, nothing", a, ask{tok("nobody"), "rollouts", identity.Read, "misc"}, false},
		{"anonymous reads (anonymousRead)", a, ask{identity.Anonymous, "rollouts", identity.Read, "cart"}, true},
		{"anonymous does nothing else", a, ask{identity.Anonymous, "rollouts", identity.Pause, "cart"}, false},
		{"the default role", withDefault, ask{tok("nobody"), "rollouts", identity.Read, "cart"}, true},
		{"the default role, only", withDefault, ask{tok("nobody"), "rollouts", identity.Pause, "cart"}, false},
		{"open: a token does everything", authz.Open(), ask{tok("nobody"), "fleet", identity.StopLine, ""}, true},
		{"open: anonymous reads", authz.Open(), ask{identity.Anonymous, "rollouts", identity.Read, "shop"}, true},
		{"open: anonymous does nothing else", authz.Open(), ask{identity.Anonymous, "rollouts", identity.Abort, "shop"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Allowed(tt.ask.who, tt.ask.res, tt.ask.perm, tt.ask.app)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Allowed(%v) = %v, want %v", tt.ask, got, tt.want)
			}
		})
	}
}

func TestPermissions(t *testing.T) {
	a, err := authz.New(fleetConfig(policy, ""))
	if err != nil {
		t.Fatal(err)
	}
	all := identity.ProjectPermissions
	tests := []struct {
		name string
		a    *authz.Authorizer
		who  identity.Principal
		want map[string][]identity.Permission
	}{
		{"viewer", a, tok("view-a"), map[string][]identity.Permission{"a": {identity.Read}}},
		{"operator", a, tok("op-a"), map[string][]identity.Permission{"a": {"read", "pause", "resume", "retry", "refresh", "abort"}}},
		{"approver but for one application", a, tok("ci"), map[string][]identity.Permission{"a": {"read"}}},
		{"fleet-wide admin", a, tok("root"), map[string][]identity.Permission{"a": all, "b": all, "default": all, "*": {"stop-line", "tokens"}}},
		{"nobody", a, tok("nobody"), map[string][]identity.Permission{}},
		{"anonymous", a, identity.Anonymous, map[string][]identity.Permission{"a": {"read"}, "b": {"read"}, "default": {"read"}}},
		{"open", authz.Open(), tok("x"), map[string][]identity.Permission{"default": all, "*": {"stop-line", "tokens"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.a.Permissions(tt.who)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff([]string{"a", "b", "default"}, a.Projects()); diff != "" {
		t.Errorf("projects (-want +got):\n%s", diff)
	}
}

// SetTokens replacing the created tokens' grants (a token created or
// revoked on any replica) never refuses, meanwhile, a token whose grant
// stays: a request is decided before or after the change, not in between.
func TestSetTokensHasNoGap(t *testing.T) {
	a, err := authz.New(fleetConfig("", ""))
	if err != nil {
		t.Fatal(err)
	}
	ts := []tokens.Token{{Name: "bot", Grants: []tokens.Grant{{Project: "a", Role: "operator"}}}}
	if err := a.SetTokens(ts); err != nil {
		t.Fatal(err)
	}
	bot := identity.OfToken("bot", identity.ViaToken)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			more := append(slices.Clone(ts), tokens.Token{Name: fmt.Sprintf("t%d", i), Grants: []tokens.Grant{{Project: "b", Role: "viewer"}}})
			if err := a.SetTokens(more); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	refused := 0
	for {
		select {
		case <-done:
			if refused > 0 {
				t.Errorf("bot was refused %d times while the grants were replaced", refused)
			}
			return
		default:
		}
		if ok, err := a.Allowed(bot, "rollouts", identity.Pause, "shop"); err != nil || !ok {
			refused++
		}
	}
}
