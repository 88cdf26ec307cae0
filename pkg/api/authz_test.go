package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// authzAPI serves rollouts a1 (shop, project a) and b1 (cart, project b),
// both in flight, behind the tokens view-a (viewer of a), op-a (operator
// of a), root (admin in every project) and nobody (no role); each token's
// secret is its name.
func authzAPI(t *testing.T) (*httptest.Server, *api.Authn) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for id, app := range map[string]string{"a1": "shop", "b1": "cart"} {
		ro := rollout.Rollout{ID: id, Application: app, Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}}}
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{
		Applications: []config.Application{{Name: "shop"}, {Name: "cart"}},
		Projects: []config.Project{
			{Name: "a", Applications: []string{"shop"}, Roles: []config.ProjectRole{
				{Name: "viewer", Subjects: []string{"token:view-a"}},
				{Name: "operator", Subjects: []string{"token:op-a"}},
			}},
			{Name: "b", Applications: []string{"cart"}},
		},
		RBAC: &config.RBAC{Policy: "g, token:root, role:admin, *\n"},
	}
	az, err := authz.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, n := range []string{"view-a", "op-a", "root", "nobody"} {
		tokens[n] = n
	}
	authn, err := api.NewAuthn(tokens)
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplicationInfos(embedded.NewRepo(s, nil),
		api.ApplicationInfo{Name: "shop"}, api.ApplicationInfo{Name: "cart"}).
		WithClusters(api.ClusterInfo{Name: "c1"}).WithAuthorizer(az, authn.Forbidden())
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(authn.Require(mux))
	t.Cleanup(srv.Close)
	return srv, authn
}

func TestAuthorization(t *testing.T) {
	srv, authn := authzAPI(t)
	tests := []struct {
		name, method, path, token string
		want                      string // status and summary
	}{
		{"a viewer reads its project's rollout", "GET", "/api/v1/rollouts/a1", "view-a", "200 a1"},
		{"not another project's", "GET", "/api/v1/rollouts/b1", "view-a", "403 view-a may not read in project b (needs read)"},
		{"nor its timeline", "GET", "/api/v1/rollouts/b1/events", "view-a", "403 view-a may not read in project b (needs read)"},
		{"nor its application", "GET", "/api/v1/applications/cart", "view-a", "403 view-a may not read in project b (needs read)"},
		{"nor its list", "GET", "/api/v1/rollouts?application=cart", "view-a", "403 view-a may not read in project b (needs read)"},
		{"an unknown rollout is 404", "GET", "/api/v1/rollouts/nope", "view-a", "404 rollout not found: nope"},
		{"an unknown application is 404", "GET", "/api/v1/applications/nope", "view-a", `404 no application "nope" is configured`},
		{"a viewer does not pause", "POST", "/api/v1/rollouts/a1/pause", "view-a", "403 view-a may not pause in project a (needs pause)"},
		{"an operator pauses", "POST", "/api/v1/rollouts/a1/pause", "op-a", "202 by op-a"},
		{"not another project's", "POST", "/api/v1/rollouts/b1/pause", "op-a", "403 op-a may not pause in project b (needs pause)"},
		{"an operator does not approve", "POST", "/api/v1/rollouts/a1/waves/1/approval", "op-a", "403 op-a may not approve in project a (needs approve)"},
		{"nor quarantine", "POST", "/api/v1/applications/shop/quarantine", "op-a", "403 op-a may not quarantine in project a (needs quarantine)"},
		{"nor stop the line", "POST", "/api/v1/fleet/stop", "op-a", "403 op-a may not stop-line (needs stop-line in every project: role admin granted with *)"},
		{"a fleet-wide admin stops it", "POST", "/api/v1/fleet/stop", "root", "202 by root"},
		{"and pauses any project's", "POST", "/api/v1/rollouts/b1/pause", "root", "202 by root"},
		{"no role reads nothing", "GET", "/api/v1/rollouts/a1", "nobody", "403 nobody may not read in project a (needs read)"},
	}
	var got, want []string
	for _, tt := range tests {
		status, _, body := call(t, srv, tt.method, tt.path, tt.token, "")
		got = append(got, tt.name+": "+strconv.Itoa(status)+" "+summary(body))
		want = append(want, tt.name+": "+tt.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if n := testutil.ToFloat64(authn.Forbidden()); n != 10 {
		t.Errorf("flotilla_api_requests_refused_total{reason=\"forbidden\"} = %v, want 10", n)
	}
}

// Reads answer only what the principal may read.
func TestFilteredReads(t *testing.T) {
	srv, _ := authzAPI(t)
	ids := func(tok, path, field string) []string {
		_, _, body := call(t, srv, "GET", path, tok, "")
		var items []map[string]any
		if err := json.Unmarshal([]byte(body), &items); err != nil {
			t.Fatalf("%s: %v: %s", path, err, body)
		}
		var out []string
		for _, it := range items {
			out = append(out, it[field].(string))
		}
		slices.Sort(out)
		return out
	}
	clusterApps := func(tok string) []string {
		_, _, body := call(t, srv, "GET", "/api/v1/clusters", tok, "")
		var cs []api.ClusterView
		if err := json.Unmarshal([]byte(body), &cs); err != nil {
			t.Fatal(err)
		}
		var out []string
		for app := range cs[0].Applications {
			out = append(out, app)
		}
		slices.Sort(out)
		return out
	}
	got := map[string][]string{
		"rollouts view-a":     ids("view-a", "/api/v1/rollouts", "id"),
		"rollouts root":       ids("root", "/api/v1/rollouts", "id"),
		"rollouts nobody":     ids("nobody", "/api/v1/rollouts", "id"),
		"applications view-a": ids("view-a", "/api/v1/applications", "name"),
		"applications root":   ids("root", "/api/v1/applications", "name"),
		"clusters view-a":     clusterApps("view-a"),
		"clusters root":       clusterApps("root"),
	}
	want := map[string][]string{
		"rollouts view-a":     {"a1"},
		"rollouts root":       {"a1", "b1"},
		"rollouts nobody":     nil,
		"applications view-a": {"shop"},
		"applications root":   {"cart", "shop"},
		"clusters view-a":     {"shop"},
		"clusters root":       {"cart", "shop"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// whoami says what the principal may do, per project.
func TestWhoamiPermissions(t *testing.T) {
	srv, _ := authzAPI(t)
	got := map[string]api.Whoami{}
	for _, tok := range []string{"view-a", "op-a", "nobody"} {
		_, _, body := call(t, srv, "GET", "/api/v1/whoami", tok, "")
		var w api.Whoami
		if err := json.Unmarshal([]byte(body), &w); err != nil {
			t.Fatal(err)
		}
		got[tok] = w
	}
	want := map[string]api.Whoami{
		"view-a": {Name: "view-a", Via: "token", Permissions: api.Permissions{"a": {"read"}}, Applications: map[string]string{"shop": "a"}},
		"op-a": {Name: "op-a", Via: "token", Permissions: api.Permissions{"a": {"read", "pause", "resume", "retry", "refresh", "abort"}},
			Applications: map[string]string{"shop": "a"}},
		"nobody": {Name: "nobody", Via: "token", Permissions: api.Permissions{}, Applications: map[string]string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A release set's rollout is authorized in the set's project (the project
// listing the set's name; its members follow it): the roles of another
// project, one listing an application beside it, do nothing to it.
func TestReleaseSetAuthorization(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	ro := rollout.Rollout{ID: "s1", Application: "shop", Members: []string{"shop-api", "shop-frontend"}, Phase: rollout.Progressing,
		Waves: []rollout.Wave{{Name: "all", Approvals: 1, Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}}}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	role := func(name, token string) config.ProjectRole {
		return config.ProjectRole{Name: name, Subjects: []string{"token:" + token}}
	}
	cfg := &config.Config{
		Applications: []config.Application{{Name: "shop-api", MemberOf: "shop"}, {Name: "shop-frontend", MemberOf: "shop"}, {Name: "cart"}, {Name: "shop"}},
		ReleaseSets:  []config.ReleaseSet{{Name: "shop", Applications: []string{"shop-api", "shop-frontend"}}},
		Projects: []config.Project{
			{Name: "payments", Applications: []string{"shop"}, Roles: []config.ProjectRole{role("approver", "appr-pay"), role("operator", "op-pay")}},
			{Name: "web", Applications: []string{"cart"}, Roles: []config.ProjectRole{role("approver", "appr-web"), role("operator", "op-web"), role("viewer", "view-web")}},
		},
	}
	az, err := authz.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	for _, n := range []string{"appr-pay", "op-pay", "appr-web", "op-web", "view-web"} {
		tokens[n] = n
	}
	authn, err := api.NewAuthn(tokens)
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplicationInfos(embedded.NewRepo(s, nil),
		api.ApplicationInfo{Name: "shop"}, api.ApplicationInfo{Name: "cart"}).
		WithClusters(api.ClusterInfo{Name: "c1"}).WithAuthorizer(az, authn.Forbidden())
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(authn.Require(mux))
	t.Cleanup(srv.Close)
	tests := []struct {
		name, method, path, token string
		want                      string // status and summary
	}{
		{"another project's approver does not approve the set", "POST", "/api/v1/rollouts/s1/waves/1/approval", "appr-web", "403 appr-web may not approve in project payments (needs approve)"},
		{"the set's project's approver does", "POST", "/api/v1/rollouts/s1/waves/1/approval", "appr-pay", "202 by appr-pay"},
		{"another project's operator does not pause it", "POST", "/api/v1/rollouts/s1/pause", "op-web", "403 op-web may not pause in project payments (needs pause)"},
		{"the set's project's operator does", "POST", "/api/v1/rollouts/s1/pause", "op-pay", "202 by op-pay"},
		{"another project's viewer does not read it", "GET", "/api/v1/rollouts/s1", "view-web", "403 view-web may not read in project payments (needs read)"},
		{"nor the set's application", "GET", "/api/v1/applications/shop", "view-web", "403 view-web may not read in project payments (needs read)"},
	}
	var got, want []string
	for _, tt := range tests {
		status, _, body := call(t, srv, tt.method, tt.path, tt.token, "")
		got = append(got, tt.name+": "+strconv.Itoa(status)+" "+summary(body))
		want = append(want, tt.name+": "+tt.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"payments", "payments", "payments", "web"}, []string{az.ProjectOf("shop"), az.ProjectOf("shop-api"), az.ProjectOf("shop-frontend"), az.ProjectOf("cart")}); diff != "" {
		t.Errorf("projects of shop, its members and cart (-want +got):\n%s", diff)
	}
}
