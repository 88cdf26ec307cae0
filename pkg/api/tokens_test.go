package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/authz"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// tokensAPI serves rollout a1 (shop, project a) behind the config tokens
// root (admin in every project) and ops (operator of a), each token's
// secret its name, and the created tokens of a registry; opts are the
// Authn's.
func tokensAPI(t *testing.T, opts ...api.AuthnOption) (*httptest.Server, *store.Store, *prometheus.Registry) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	ro := rollout.Rollout{ID: "a1", Application: "shop", Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "all", Approvals: 1, Clusters: []rollout.Cluster{{Name: "c1", Phase: rollout.ClusterPending}}}}}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{
		Applications: []config.Application{{Name: "shop"}},
		Projects: []config.Project{{Name: "a", Applications: []string{"shop"}, Roles: []config.ProjectRole{
			{Name: "operator", Subjects: []string{"token:ops"}},
		}}},
		RBAC: &config.RBAC{Policy: "g, token:root, role:admin, *\n"},
	}
	az, err := authz.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := tokens.New(s, nil)
	reg.OnChange(func(ts []tokens.Token) {
		if err := az.SetTokens(ts); err != nil {
			t.Error(err)
		}
	})
	if err := reg.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	metrics := prometheus.NewRegistry()
	authn, err := api.NewAuthn(map[string]string{"root": "root", "ops": "ops"},
		append([]api.AuthnOption{api.WithTokens(reg), api.WithRegisterer(metrics)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	a := api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplicationInfos(repo, api.ApplicationInfo{Name: "shop"}).
		WithAuthorizer(az, authn.Forbidden()).WithAuditLog(s).
		WithTokenAdmin(reg, map[string]string{"root": tokens.Sum("root"), "ops": tokens.Sum("ops")})
	mux := http.NewServeMux()
	a.Register(mux)
	srv := httptest.NewServer(authn.Require(mux))
	t.Cleanup(srv.Close)
	return srv, s, metrics
}

func tcall(t *testing.T, method, url, token, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// The admin creates a token granting a role in a project: its secret is
// answered once (never listed), it may do what the role allows there and
// nothing else, and once revoked it is refused at once; a config token is
// revoked the same way. Only the admin manages tokens; each change is
// audited.
func TestRuntimeTokens(t *testing.T) {
	srv, s, _ := tokensAPI(t)
	base := srv.URL + "/api/v1"
	status, _, body := tcall(t, "POST", base+"/tokens", "ops", `{"name":"bot","project":"a","role":"viewer"}`)
	if status != 403 || !strings.Contains(body, "ops may not tokens") {
		t.Fatalf("an operator creating a token: %d %s, want 403", status, body)
	}
	for _, bad := range []string{
		`{"name":"bot","project":"nope","role":"viewer"}`,
		`{"name":"bot","project":"a","role":"king"}`,
		`{"name":"bot","project":"a","role":"viewer","expires":"soon"}`,
		`{"name":"Bot!","project":"a","role":"viewer"}`,
	} {
		if status, _, body := tcall(t, "POST", base+"/tokens", "root", bad); status != 400 {
			t.Errorf("creating %s: %d %s, want 400", bad, status, body)
		}
	}
	if status, _, body := tcall(t, "POST", base+"/tokens", "root", `{"name":"ops","project":"a","role":"viewer"}`); status != 409 {
		t.Errorf("creating a token of a config token's name: %d %s, want 409", status, body)
	}
	status, _, body = tcall(t, "POST", base+"/tokens", "root", `{"name":"bot","project":"a","role":"operator","expires":"30d","reason":"CI"}`)
	if status != 201 {
		t.Fatalf("creating bot: %d %s", status, body)
	}
	var created api.TokenCreated
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	if created.Token.CreatedBy != "root" || created.Token.ExpiresAt == nil || time.Until(*created.Token.ExpiresAt) < 29*24*time.Hour {
		t.Errorf("created %+v: want by root, expiring in 30 days", created.Token)
	}
	bot := created.Secret
	status, _, body = tcall(t, "GET", base+"/tokens", "root", "")
	if status != 200 || strings.Contains(body, bot) || strings.Contains(body, tokens.Sum(bot)) || !strings.Contains(body, `"name":"bot"`) {
		t.Errorf("listing: %d %s: want bot, without its secret or hash", status, body)
	}
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/rollouts/a1", "200"},
		{"POST", "/rollouts/a1/pause", "202"},
		{"POST", "/rollouts/a1/rollback", "403"},
		{"POST", "/fleet/stop", "403"},
		{"GET", "/tokens", "403"},
	} {
		if status, _, body := tcall(t, c.method, base+c.path, bot, `{}`); strconv.Itoa(status) != c.want {
			t.Errorf("bot %s %s: %d %s, want %s", c.method, c.path, status, body, c.want)
		}
	}
	// A machine's token: its approval never counts.
	status, _, body = tcall(t, "POST", base+"/tokens", "root", `{"name":"robot","project":"a","role":"approver","automation":true}`)
	if status != 201 || !strings.Contains(body, `"automation":true`) {
		t.Fatalf("creating robot: %d %s", status, body)
	}
	if err := json.Unmarshal([]byte(body), &created); err != nil {
		t.Fatal(err)
	}
	if status, _, body := tcall(t, "POST", base+"/rollouts/a1/waves/1/approval", created.Secret, `{}`); status != 403 || !strings.Contains(body, "robot is automation and never counts as an approver") {
		t.Errorf("robot approving: %d %s, want 403 as automation", status, body)
	}
	if status, _, body := tcall(t, "POST", base+"/tokens/bot/revoke", "root", `{"reason":"leaked"}`); status != 200 || !strings.Contains(body, `"revokedBy":"root"`) {
		t.Fatalf("revoking bot: %d %s", status, body)
	}
	if status, _, body := tcall(t, "GET", base+"/rollouts/a1", bot, ""); status != 401 || !strings.Contains(body, "API token bot is revoked") {
		t.Errorf("bot once revoked: %d %s, want 401", status, body)
	}
	if status, _, _ := tcall(t, "POST", base+"/tokens/nobody/revoke", "root", `{}`); status != 404 {
		t.Errorf("revoking nobody: %d, want 404", status)
	}
	// A config token.
	if status, _, body := tcall(t, "POST", base+"/tokens/ops/revoke", "root", `{}`); status != 200 {
		t.Fatalf("revoking ops: %d %s", status, body)
	}
	if status, _, body := tcall(t, "GET", base+"/rollouts/a1", "ops", ""); status != 401 || !strings.Contains(body, "API token ops is revoked") {
		t.Errorf("ops once revoked: %d %s, want 401", status, body)
	}
	// The audit: a refused creation, the creation, both revocations.
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Event.Type() != events.TypeAuditRecorded {
			continue
		}
		rec, err := events.Decode[events.AuditRecorded](r.Event)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Action == "tokens" {
			got = append(got, rec.Principal.Name+" "+rec.Decision+" "+strings.SplitN(rec.Detail, ":", 2)[0]+" "+rec.Reason)
		}
	}
	want := []string{"ops refused  ", "root allowed create bot CI", "root allowed create robot ", "root allowed revoke bot leaked", "root allowed revoke ops "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("audit records of the tokens:\n got %q\nwant %q", got, want)
	}
}

// Failed bearer tokens are limited per client address: beyond the burst
// every bearer request from it is 429 with Retry-After, counted; another
// address is not limited.
func TestBearerFailureLimit(t *testing.T) {
	srv, _, metrics := tokensAPI(t, api.BearerFailureLimit(3, time.Minute))
	url := srv.URL + "/api/v1/rollouts/a1"
	for i := range 3 {
		if status, _, _ := tcall(t, "GET", url, "guess"+strconv.Itoa(i), ""); status != 401 {
			t.Fatalf("failure %d: %d, want 401", i+1, status)
		}
	}
	status, h, body := tcall(t, "GET", url, "root", "")
	if status != 429 || h.Get("Retry-After") == "" || !strings.Contains(body, "too many") {
		t.Errorf("a good token after 3 failures: %d Retry-After %q %s, want 429 with Retry-After", status, h.Get("Retry-After"), body)
	}
	if got := testutil.ToFloat64(counterOf(t, metrics, "throttled")); got != 1 {
		t.Errorf("flotilla_api_requests_refused_total{reason=throttled} = %v, want 1", got)
	}
}

// counterOf is flotilla_api_requests_refused_total{reason} of reg.
func counterOf(t *testing.T, reg *prometheus.Registry, reason string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "flotilla_api_requests_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
					c.Add(m.GetCounter().GetValue())
					return c
				}
			}
		}
	}
	t.Fatalf("no flotilla_api_requests_refused_total{reason=%q}", reason)
	return nil
}
