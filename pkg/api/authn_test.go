package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/gates"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// credential is what a request carries: a bearer token, a session cookie,
// the CSRF header.
type credential struct {
	name          string
	authorization string
	cookie        string
	csrf          bool
}

// sessions are session cookies' values, made by the server's Authn itself
// (a login) or by another's: valid, expired, tampered, of a token no
// longer configured, signed with another secret.
type sessions struct{ valid, expired, tampered, removed, resigned string }

func makeSessions(t *testing.T, now time.Time) sessions {
	t.Helper()
	login := func(tokens map[string]string, at time.Time, secret string) string {
		a, err := api.NewAuthn(tokens, api.WithClock(func() time.Time { return at }))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := a.Login(context.Background(), secret, false)
		if err != nil {
			t.Fatal(err)
		}
		return c.Value
	}
	valid := login(map[string]string{"ops": token}, now, token)
	name, rest, _ := strings.Cut(valid, ".")
	expiry, mac, _ := strings.Cut(rest, ".")
	return sessions{
		valid:    valid,
		expired:  login(map[string]string{"ops": token}, now.Add(-api.SessionTTL-time.Second), token),
		tampered: name + "." + expiry + "0." + mac, // a later expiry, the same signature
		removed:  login(map[string]string{"gone": "g-token"}, now, "g-token"),
		resigned: login(map[string]string{"ops": "old-secret"}, now, "old-secret"),
	}
}

const refusedHelp = "Requests to the API and the web UI refused: reason unauthenticated (no, an unknown, a revoked or an expired credential; a wrong token at the UI's login), throttled (a bearer token from an address that sent too many failed ones: 429), csrf (a control of the UI's session without its X-Flotilla-CSRF header) or forbidden (a permission the principal's roles do not grant in the project)."

// TestAuthentication: every route class of the API, with and without
// each kind of credential, reads closed and open.
func TestAuthentication(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	ss := makeSessions(t, now)
	creds := []credential{
		{name: "none"},
		{name: "bearer", authorization: "Bearer " + token},
		{name: "bearer, lower case", authorization: "bearer " + token},
		{name: "unknown bearer", authorization: "Bearer nope"},
		{name: "basic", authorization: "Basic b3BzOnMzY3JldA=="},
		{name: "session", cookie: ss.valid},
		{name: "session with CSRF header", cookie: ss.valid, csrf: true},
		{name: "expired session", cookie: ss.expired, csrf: true},
		{name: "tampered session", cookie: ss.tampered, csrf: true},
		{name: "session of a removed token", cookie: ss.removed, csrf: true},
		{name: "session of a token's old secret", cookie: ss.resigned, csrf: true},
		{name: "garbage session", cookie: "ops", csrf: true},
	}
	routes := []struct{ class, method, path, body string }{
		{"read", "GET", "/api/v1/rollouts/r1", ""},
		{"read, HEAD", "HEAD", "/api/v1/rollouts/r1", ""},
		{"watch", "GET", "/api/v1/watch", ""},
		{"control", "POST", "/api/v1/fleet/stop", `{"reason":"test"}`},
		{"whoami", "GET", "/api/v1/whoami", ""},
		{"unknown route", "GET", "/api/v1/nope", ""},
	}
	const (
		needsToken   = "401 this call needs an API token: send Authorization: Bearer <token> (server.apiTokens), or set server.anonymousRead: true to open reads"
		controlNeeds = "401 this call changes state and needs an API token: send Authorization: Bearer <token> (server.apiTokens)"
		unknown      = "401 unknown API token"
		stale        = "401 the session has expired or is no longer valid: log in again at /ui/login"
		csrf         = "403 missing X-Flotilla-CSRF header"
	)
	// want[anonymousRead][credential][route class]; what is not listed is
	// the route's own answer to ops.
	ok := map[string]string{
		"read": "200 r1", "read, HEAD": "200 ", "watch": "404 watching is not enabled", "control": "202 by ops",
		"unknown route": "404 404 page not found",
	}
	want := func(anonymousRead bool, c credential, class string) string {
		via := ""
		switch {
		case strings.HasPrefix(c.authorization, "Bearer") || strings.HasPrefix(c.authorization, "bearer"):
			if !strings.HasSuffix(c.authorization, token) {
				return unknown
			}
			via = "token"
		case c.cookie == ss.valid:
			if class == "control" && !c.csrf {
				return csrf
			}
			via = "session"
		}
		reads := class != "control"
		switch {
		case via == "" && reads && anonymousRead:
			if class == "whoami" {
				return "200 anonymous via anonymous"
			}
			via = "anonymous"
		case via == "" && !reads:
			if c.cookie != "" {
				return stale
			}
			return controlNeeds
		case via == "" && c.cookie != "":
			return stale
		case via == "":
			return needsToken
		}
		if class == "whoami" {
			return "200 ops via " + via
		}
		return ok[class]
	}
	for _, anonymousRead := range []bool{false, true} {
		t.Run(fmt.Sprintf("anonymousRead %v", anonymousRead), func(t *testing.T) {
			reg := prometheus.NewRegistry()
			srv := serve(t, newAuthnAPI(t), map[string]string{"ops": token},
				api.AnonymousRead(anonymousRead), api.WithClock(func() time.Time { return now }), api.WithRegisterer(reg))
			var got, wanted []string
			refused := map[string]int{}
			for _, c := range creds {
				for _, rt := range routes {
					w := want(anonymousRead, c, rt.class)
					if rt.method == http.MethodHead {
						w = w[:3] + " " // the status; no body
					}
					switch w[:3] {
					case "401":
						refused["unauthenticated"]++
					case "403":
						refused["csrf"]++
					}
					status, h, body := send(t, srv.URL, rt.method, rt.path, c, rt.body)
					if status == http.StatusUnauthorized && h.Get("WWW-Authenticate") != `Bearer realm="flotilla"` {
						body += " (no WWW-Authenticate)"
					}
					got = append(got, c.name+", "+rt.class+": "+fmt.Sprint(status)+" "+summary(body))
					wanted = append(wanted, c.name+", "+rt.class+": "+w)
				}
			}
			if diff := cmp.Diff(wanted, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			metric := fmt.Sprintf(`# HELP flotilla_api_requests_refused_total %s
# TYPE flotilla_api_requests_refused_total counter
flotilla_api_requests_refused_total{reason="csrf"} %d
flotilla_api_requests_refused_total{reason="forbidden"} 0
flotilla_api_requests_refused_total{reason="throttled"} 0
flotilla_api_requests_refused_total{reason="unauthenticated"} %d
`, refusedHelp, refused["csrf"], refused["unauthenticated"])
			if err := testutil.GatherAndCompare(reg, strings.NewReader(metric), "flotilla_api_requests_refused_total"); err != nil {
				t.Error(err)
			}
		})
	}
}

// Without any API token, every protected route says what to configure;
// anonymousRead opens the reads still.
func TestAuthenticationWithoutTokens(t *testing.T) {
	const noTokens = "this flotilla has no API token: set server.apiTokens (or server.apiToken) in its config, or server.anonymousRead: true to open reads"
	tests := []struct {
		name          string
		anonymousRead bool
		method, path  string
		cred          credential
		want          string
	}{
		{"read", false, "GET", "/api/v1/rollouts/r1", credential{}, "401 " + noTokens},
		{"read with a bearer", false, "GET", "/api/v1/rollouts/r1", credential{authorization: "Bearer x"}, "401 " + noTokens},
		{"control", false, "POST", "/api/v1/fleet/stop", credential{authorization: "Bearer x"}, "401 " + noTokens},
		{"read, open", true, "GET", "/api/v1/rollouts/r1", credential{}, "200 r1"},
		{"whoami, open", true, "GET", "/api/v1/whoami", credential{}, "200 anonymous via anonymous"},
		{"control, reads open", true, "POST", "/api/v1/fleet/stop", credential{authorization: "Bearer x"}, "401 " + noTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := serve(t, newAuthnAPI(t), nil, api.AnonymousRead(tt.anonymousRead))
			status, _, body := send(t, srv.URL, tt.method, tt.path, tt.cred, "")
			if diff := cmp.Diff(tt.want, fmt.Sprint(status)+" "+summary(body)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A session lasts SessionTTL, its cookie as the contract says.
func TestLoginCookie(t *testing.T) {
	now := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	a, err := api.NewAuthn(map[string]string{"ops": token, "ci": "c-token"}, api.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	c, p, err := a.Login(context.Background(), " c-token\n", true)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Name, strings.Count(c.Value, "."), strings.HasPrefix(c.Value, fmt.Sprintf("ci.%d.", now.Add(12*time.Hour).Unix())),
		strings.Contains(c.Value, "c-token"), c.Path, c.HttpOnly, c.Secure, c.SameSite, c.MaxAge, c.Expires, p.Name, string(p.Via)}
	want := []any{"flotilla_session", 2, true, false, "/", true, true, http.SameSiteStrictMode, 43200, now.Add(12 * time.Hour), "ci", "session"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cookie (-want +got):\n%s", diff)
	}
	if _, _, err := a.Login(context.Background(), "nope", false); err == nil || err.Error() != "unknown API token" {
		t.Errorf("login with an unknown token: %v", err)
	}
	out, err := a.Logout(httptest.NewRequest(http.MethodPost, "/ui/logout", nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{"flotilla_session", "", -1, false}, []any{out.Name, out.Value, out.MaxAge, out.Secure}); diff != "" {
		t.Errorf("logout cookie (-want +got):\n%s", diff)
	}
}

// A session of each token works, whatever its name holds (config allows
// DNS labels only; a dot must not break the cookie's parsing either).
func TestSessionOfEveryName(t *testing.T) {
	names := []string{"ops", "ci-prod", "ci.prod", "a.b.c", "default"}
	tokens := map[string]string{}
	for i, n := range names {
		tokens[n] = fmt.Sprintf("secret-%d", i)
	}
	a, err := api.NewAuthn(tokens)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range names {
		c, _, err := a.Login(context.Background(), fmt.Sprintf("secret-%d", i), false)
		if err != nil {
			t.Fatal(err)
		}
		req := requestWith(t, c)
		p, err := a.Authenticate(req)
		got = append(got, fmt.Sprint(p.Name, " ", p.Via, " ", err))
	}
	var want []string
	for _, n := range names {
		want = append(want, n+" session <nil>")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
}

func requestWith(t *testing.T, c *http.Cookie) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://flotilla/api/v1/whoami", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(c)
	return req
}

// newAuthnAPI is the API over a store holding rollout r1.
func newAuthnAPI(t *testing.T) *api.API {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	if _, err := repo.Create(t.Context(), rollout.Rollout{ID: "r1", Application: "shop", Phase: rollout.Progressing}); err != nil {
		t.Fatal(err)
	}
	return api.New(repo, gates.NewStoreApprovals(s), s, nil)
}

func send(t *testing.T, base, method, path string, c credential, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c.authorization != "" {
		req.Header.Set("Authorization", c.authorization)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: api.SessionCookie, Value: c.cookie})
	}
	if c.csrf {
		req.Header.Set(api.CSRFHeader, "1")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// summary is the part of an answer the table compares: its error, who a
// control was recorded as, who whoami names, the rollout's id.
func summary(body string) string {
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil {
		return strings.TrimSpace(body)
	}
	switch {
	case m["error"] != nil:
		return fmt.Sprint(m["error"])
	case m["by"] != nil:
		return fmt.Sprint("by ", m["by"])
	case m["via"] != nil:
		return fmt.Sprint(m["name"], " via ", m["via"])
	case m["id"] != nil:
		return fmt.Sprint(m["id"])
	}
	return body
}

// A token of an empty secret takes nothing; two names of one secret are
// always the same one (the first by name), not the map's order.
func TestTokensEdges(t *testing.T) {
	a, err := api.NewAuthn(map[string]string{"b": "same", "a": "same", "empty": "", "c": "c-token"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, h := range []string{"Bearer same", "Bearer ", "Bearer", "Bearer  c-token ", "bEaReR c-token"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://flotilla/api/v1/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", h)
		p, err := a.Authenticate(req)
		got = append(got, fmt.Sprintf("%q: %s %v", h, p.Name, err))
	}
	_, _, err = a.Login(context.Background(), "", false)
	got = append(got, fmt.Sprintf("login with nothing: %v", err))
	want := []string{
		`"Bearer same": a <nil>`,
		`"Bearer ":  unknown API token`,
		`"Bearer":  this call needs an API token: send Authorization: Bearer <token> (server.apiTokens), or set server.anonymousRead: true to open reads`,
		`"Bearer  c-token ": c <nil>`,
		`"bEaReR c-token": c <nil>`,
		"login with nothing: unknown API token",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
