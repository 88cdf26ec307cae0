package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

const token = "s3cret"

// newAPI serves the API over a real store holding r1 (in flight), r2
// (whose rollback failed in c2) and r3 (finished).
func newAPI(t *testing.T, tok string) (*httptest.Server, *store.Store) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		ro := rollout.Rollout{ID: id, Application: "shop", Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{
			{Name: "c1", Phase: rollout.ClusterPending}, {Name: "c2", Phase: rollout.ClusterPending},
		}}}}
		if id == "r4" { // a second wave that needs an approval
			ro.Waves = append(ro.Waves, rollout.Wave{Name: "prod", Approvals: 1, Clusters: []rollout.Cluster{{Name: "c3", Phase: rollout.ClusterPending}}})
		}
		if _, err := repo.Create(t.Context(), ro); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	for id, change := range map[string]func(*rollout.Rollout){
		"r2": func(r *rollout.Rollout) {
			r.Phase, r.Waves[0].Clusters[1].Phase = rollout.RollbackFailed, rollout.ClusterRevertFailed
		},
		"r4": func(r *rollout.Rollout) {
			r.Waves[0].Clusters[1].Phase = rollout.ClusterFailed
			r.Waves[0].PullRequest = &rollout.PullRequest{State: rollout.PullRequestOpen, Number: 9, AutoMerge: events.MergeFailed}
		},
		"r3": func(r *rollout.Rollout) {
			// It finished, with a failure recorded on the way.
			r.Phase = rollout.Succeeded
			r.Failures = []rollout.Failure{{Function: "observe", EventID: "e1", EventType: events.TypeCanary, Error: "boom"}}
		},
	} {
		if _, err := repo.Update(t.Context(), id, func(r *rollout.Rollout) error { change(r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	tokens := map[string]string{}
	if tok != "" {
		tokens["ops"] = tok
	}
	return serve(t, api.New(repo, gates.NewStoreApprovals(s), s, nil).WithApplications("shop"), tokens), s
}

// serve serves a behind the authentication of tokens (name -> secret).
func serve(t *testing.T, a *api.API, tokens map[string]string, opts ...api.AuthnOption) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	a.Register(mux)
	authn, err := api.NewAuthn(tokens, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(authn.Require(mux))
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path, tok, body string) (int, http.Header, string) {
	t.Helper()
	var c credential
	if tok != "" {
		c.authorization = "Bearer " + tok
	}
	return send(t, srv.URL, method, path, c, body)
}

func TestAPI(t *testing.T) {
	srv, _ := newAPI(t, token)
	tests := []struct {
		name, method, path, token, body string
		want                            int
		wantBody                        string // a substring
	}{
		{"list", "GET", "/api/v1/rollouts", token, "", 200, `"id":"r3"`},
		{"list, bad limit", "GET", "/api/v1/rollouts?limit=0", token, "", 400, "limit: want a number from 1 to 1000"},
		{"get", "GET", "/api/v1/rollouts/r1", token, "", 200, `"id":"r1"`},
		{"get finished", "GET", "/api/v1/rollouts/r3", token, "", 200, `"phase":"Succeeded"`},
		{"get unknown", "GET", "/api/v1/rollouts/nope", token, "", 404, "rollout not found"},
		{"approve without a token", "POST", "/api/v1/rollouts/r1/approval", "", `{"status":"valid"}`, 401, "Bearer"},
		{"approve with a wrong token", "POST", "/api/v1/rollouts/r1/approval", "nope", `{"status":"valid"}`, 401, "unknown API token"},
		{"approve an unknown rollout", "POST", "/api/v1/rollouts/nope/approval", token, `{"status":"valid"}`, 404, "rollout not found"},
		{"approve an unknown cluster", "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"valid","cluster":"c9"}`, 400, `no cluster \"c9\"`},
		{"approve with an unknown field", "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"valid","when":"now"}`, 400, "unknown field"},
		{"approve with a bad status", "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"maybe"}`, 400, "maybe"},
		{"approve", "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"valid","by":"ann"}`, 200, `"by":"ops (ann)"`},
		{"approve, recorded as the token's name", "POST", "/api/v1/rollouts/r1/approval", token, `{"status":"valid"}`, 200, `"by":"ops"`},
		{"retry without a token", "POST", "/api/v1/rollouts/r2/retry", "", "", 401, "Bearer"},
		{"retry an unknown rollout", "POST", "/api/v1/rollouts/nope/retry", token, "", 404, "rollout not found"},
		{"retry an unknown cluster", "POST", "/api/v1/rollouts/r2/retry", token, `{"cluster":"c9"}`, 400, `no cluster \"c9\"`},
		{"retry a rollout with nothing to retry", "POST", "/api/v1/rollouts/r1/retry", token, "", 409, "nothing of it failed"},
		{"retry a finished rollout", "POST", "/api/v1/rollouts/r3/retry", token, "", 409, "has finished (Succeeded)"},
		{"pause without a token", "POST", "/api/v1/rollouts/r1/pause", "", "", 401, "Bearer"},
		{"pause an unknown rollout", "POST", "/api/v1/rollouts/nope/pause", token, "", 404, "rollout not found"},
		{"pause with an unknown field", "POST", "/api/v1/rollouts/r1/pause", token, `{"why":"x"}`, 400, `unknown field \"why\"`},
		{"pause a finished rollout", "POST", "/api/v1/rollouts/r3/pause", token, "", 409, "has finished (Succeeded)"},
		{"resume a rollout not paused", "POST", "/api/v1/rollouts/r1/resume", token, "", 409, "is not paused"},
		{"abort a rollout whose rollback failed", "POST", "/api/v1/rollouts/r2/abort", token, "", 409, "is RollbackFailed"},
		{"pause", "POST", "/api/v1/rollouts/r1/pause", token, `{"reason":"incident 42","by":"ann"}`, 202, `"by":"ops (ann)"`},
		{"abort", "POST", "/api/v1/rollouts/r1/abort", token, "", 202, `"eventId":"control/`},
		{"stop the fleet", "POST", "/api/v1/fleet/stop", token, `{"reason":"freeze"}`, 202, `"by":"ops"`},
		{"start the fleet without a token", "POST", "/api/v1/fleet/start", "", "", 401, "Bearer"},
		{"the fleet", "GET", "/api/v1/fleet", token, "", 200, "{}"},
		{"roll back a rollout in progress", "POST", "/api/v1/rollouts/r1/rollback", token, "", 409, "only a succeeded rollout"},
		{"roll back a succeeded rollout", "POST", "/api/v1/rollouts/r3/rollback", token, `{"reason":"errors"}`, 202, `"by":"ops"`},
		{"quarantine an unknown application", "POST", "/api/v1/applications/nope/quarantine", token, `{"tag":"1.0.0","reason":"x"}`, 404, `no application \"nope\"`},
		{"quarantine without a version", "POST", "/api/v1/applications/shop/quarantine", token, `{"reason":"x"}`, 400, "exactly one of tag and digest"},
		{"quarantine without a reason", "POST", "/api/v1/applications/shop/quarantine", token, `{"tag":"1.0.0"}`, 400, "needs a reason"},
		{"quarantine", "POST", "/api/v1/applications/shop/quarantine", token, `{"tag":"1.0.0","reason":"CVE-2026-1"}`, 202, `"by":"ops"`},
		{"override without a reason", "POST", "/api/v1/rollouts/r4/override", token, "", 400, "needs a reason"},
		{"override a rollout no window holds", "POST", "/api/v1/rollouts/r4/override", token, `{"reason":"fix"}`, 409, "is not held by a freeze window"},
		{"approve a wave that needs no approval", "POST", "/api/v1/rollouts/r4/waves/all/approval", token, "", 409, "needs no approval for wave 1 (all)"},
		{"approve an unknown wave", "POST", "/api/v1/rollouts/r4/waves/7/approval", token, "", 400, `has no wave \"7\"`},
		{"approve a wave", "POST", "/api/v1/rollouts/r4/waves/2/approval", token, `{"reason":"ok"}`, 202, `"by":"ops"`},
		{"retry a cluster with nothing to retry", "POST", "/api/v1/rollouts/r2/retry", token, `{"cluster":"c1"}`, 409, "nothing of it failed"},
		{"retry", "POST", "/api/v1/rollouts/r2/retry", token, `{"by":"ann"}`, 202, `"retrying":"the reverts of [c2]"`},
		{"retry a rollout in progress with nothing failed", "POST", "/api/v1/rollouts/r1/retry", token, "", 409, "is Progressing and nothing of it failed"},
		{"retry a failed cluster and a failed merge", "POST", "/api/v1/rollouts/r4/retry", token, "", 202,
			`"retrying":"the failed clusters [c2] (applied again; Flagger analyses them anew), and the merge of pull request #9 (the host is asked again)"`},
		{"retry a failed cluster", "POST", "/api/v1/rollouts/r4/retry", token, `{"cluster":"c2"}`, 202, `"retrying":"the failed clusters [c2] (applied again; Flagger analyses them anew)"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, body := call(t, srv, tt.method, tt.path, tt.token, tt.body)
			if got != tt.want || !strings.Contains(body, tt.wantBody) {
				t.Errorf("%s %s = %d %s; want %d with %q", tt.method, tt.path, got, body, tt.want, tt.wantBody)
			}
		})
	}
}

func TestAPIWithoutAToken(t *testing.T) {
	srv, _ := newAPI(t, "")
	got, _, body := call(t, srv, "POST", "/api/v1/rollouts/r2/retry", "anything", "")
	if got != 401 || !strings.Contains(body, "set server.apiTokens") {
		t.Errorf("retry on a server without a token = %d %s", got, body)
	}
}

// A retry is journaled as an event of the rollout, naming who asked.
func TestRetryIsJournaled(t *testing.T) {
	srv, s := newAPI(t, token)
	if got, _, body := call(t, srv, "POST", "/api/v1/rollouts/r2/retry", token, `{"cluster":"c2","by":"ann"}`); got != 202 {
		t.Fatalf("retry = %d %s", got, body)
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var found []events.RolloutRetryRequested
	for _, r := range recs {
		if r.Event.Type() == events.TypeRolloutRetryRequested {
			if events.RolloutID(r.Event) != "r2" {
				t.Errorf("retry event of rollout %q", events.RolloutID(r.Event))
			}
			p, err := events.Decode[events.RolloutRetryRequested](r.Event)
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, p)
		}
	}
	want := []events.RolloutRetryRequested{{RolloutID: "r2", Cluster: "c2", Attempt: 1, User: "ops (ann)"}}
	if diff := cmp.Diff(want, found); diff != "" {
		t.Errorf("journaled (-want +got):\n%s", diff)
	}
}

// The list holds what is in flight, then finished rollouts a page at a
// time, the next page named by a Link header.
func TestListPages(t *testing.T) {
	srv, _ := newAPI(t, token)
	ids := func(body string) []string {
		var ros []rollout.Rollout
		if err := json.Unmarshal([]byte(body), &ros); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range ros {
			out = append(out, r.ID)
		}
		return out
	}
	got, h, body := call(t, srv, "GET", "/api/v1/rollouts?limit=1", token, "")
	if got != 200 {
		t.Fatalf("list = %d %s", got, body)
	}
	if diff := cmp.Diff([]string{"r4", "r2", "r1", "r3"}, ids(body)); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	link := h.Get("Link")
	next, ok := strings.CutPrefix(link, "<")
	next, _, _ = strings.Cut(next, ">")
	if !ok || !strings.HasSuffix(link, `rel="next"`) {
		t.Fatalf("Link = %q", link)
	}
	got, h, body = call(t, srv, "GET", next, token, "")
	if got != 200 || len(ids(body)) != 0 || h.Get("Link") != "" {
		t.Errorf("second page = %d %s (Link %q); want empty, the end", got, body, h.Get("Link"))
	}
}

// Each named token records its holder: who approved is the name of the
// token used.
func TestControlsRecordTheTokensName(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	ro := rollout.Rollout{ID: "r1", Application: "shop", Phase: rollout.Progressing, Waves: []rollout.Wave{{Name: "all", Clusters: []rollout.Cluster{{Name: "c1"}}}}}
	if _, err := repo.Create(t.Context(), ro); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, api.New(repo, gates.NewStoreApprovals(s), s, nil), map[string]string{"alice": "a-token", "bob": "b-token"})
	for tok, want := range map[string]string{"a-token": `"by":"alice"`, "b-token": `"by":"bob"`} {
		if got, _, body := call(t, srv, "POST", "/api/v1/rollouts/r1/approval", tok, `{"status":"valid"}`); got != 200 || !strings.Contains(body, want) {
			t.Errorf("approval with %s = %d %s, want 200 with %s", tok, got, body, want)
		}
	}
	if got, _, _ := call(t, srv, "POST", "/api/v1/rollouts/r1/approval", "c-token", `{"status":"valid"}`); got != 401 {
		t.Errorf("approval with an unknown token = %d, want 401", got)
	}
}

// Every control is journaled as an event (of its rollout, if it has one)
// naming who sent it and why.
func TestControlsAreJournaled(t *testing.T) {
	srv, s := newAPI(t, token)
	for _, c := range []struct{ path, body string }{
		{"/api/v1/rollouts/r1/pause", `{"reason":"incident 42"}`},
		{"/api/v1/fleet/stop", `{"reason":"freeze","by":"ann"}`},
	} {
		if got, _, body := call(t, srv, "POST", c.path, token, c.body); got != 202 {
			t.Fatalf("POST %s = %d %s", c.path, got, body)
		}
	}
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		p, err := events.Decode[events.Control](r.Event)
		if err != nil || r.Event.Type() == events.TypeAuditRecorded { // audit_test.go checks those
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %q %q %q", r.Event.Type(), events.RolloutID(r.Event), p.RolloutID, p.User, p.Reason))
	}
	want := []string{
		events.TypeRolloutPauseRequested + ` r1 "r1" "ops" "incident 42"`,
		events.TypeFleetStopRequested + `  "" "ops (ann)" "freeze"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("journaled (-want +got):\n%s", diff)
	}
}
