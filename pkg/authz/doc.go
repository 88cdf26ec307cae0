// Package authz decides what a principal may do in which project: the
// casbin (github.com/casbin/casbin/v2) policy built from the config's
// projects, their roles and rbac.policy, on an RBAC-with-domains model
// whose domain is the project (docs/design/identity.md, "Projects and
// roles"; #31). Argo CD's users write its CSV already: a custom role is
// "p, role:deployer, rollouts, pause, payments/*, allow" and a grant
// "g, group:release, role:deployer, payments".
//
// Without projects and rbac every authenticated principal may do
// everything ([Authorizer.Open]); anonymous reads (server.anonymousRead)
// may read everything and nothing else. pkg/api asks it for each route
// (its route table names the permission) and filters its reads.
package authz
