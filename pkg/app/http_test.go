package app

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRoutesNeedAnIdentity: the server wired whole, in both modes. Every
// API route and UI page needs an identity (a token, or the UI's session),
// unless server.anonymousRead opens the reads; the hooks, the intake's
// events, health, metrics, the UI's assets and its login are open.
func TestRoutesNeedAnIdentity(t *testing.T) {
	type route struct{ method, path string }
	routes := []route{
		{"GET", "/api/v1/rollouts"},
		{"GET", "/api/v1/watch?only=rollouts"},
		{"GET", "/api/v1/whoami"},
		{"POST", "/api/v1/fleet/stop"},
		{"GET", "/ui/"},
		{"GET", "/ui/app.js"},
		{"GET", "/ui/login"},
		{"GET", "/healthz"},
		{"GET", "/metrics"},
		{"POST", "/hooks/canaries"},
	}
	// The answer's status and, for the routes flotilla's authentication
	// guards, whether it asked for a token (WWW-Authenticate).
	open := map[string]string{
		"GET /ui/app.js": "200", "GET /ui/login": "200", "GET /healthz": "200", "GET /metrics": "200",
		"POST /hooks/canaries": "401", // the receiver's own authentication: no flotilla token asked for
	}
	closed := func(r route) string {
		if s, ok := open[r.method+" "+r.path]; ok {
			return s
		}
		return "401 Bearer"
	}
	withToken := func(r route) string {
		switch r.method + " " + r.path {
		case "POST /api/v1/fleet/stop":
			return "202"
		case "GET /api/v1/whoami":
			return `200 {"name":"default","via":"token",` + adminPermissions + `}`
		}
		return closed(r)[:3]
	}
	tests := []struct {
		name   string
		server string // extra server fields
		token  bool
		want   func(route) string
	}{
		{"embedded, no credential", "", false, func(r route) string {
			if strings.HasPrefix(r.path, "/api/") || r.path == "/ui/" {
				return closed(r)
			}
			return open[r.method+" "+r.path]
		}},
		{"embedded, a token", "", true, func(r route) string {
			if strings.HasPrefix(r.path, "/api/") || r.path == "/ui/" {
				if s := withToken(r); s != "401" {
					return s
				}
				return "200"
			}
			return open[r.method+" "+r.path]
		}},
		{"embedded, reads open", "  anonymousRead: true\n", false, func(r route) string {
			switch {
			case r.method == "POST" && strings.HasPrefix(r.path, "/api/"):
				return "401 Bearer"
			case r.path == "/api/v1/whoami":
				return `200 {"name":"anonymous","via":"anonymous","permissions":{"default":["read"]},"applications":{"podinfo":"default"}}`
			case strings.HasPrefix(r.path, "/api/") || r.path == "/ui/":
				return "200"
			}
			return open[r.method+" "+r.path]
		}},
		{"scale-out, no credential", fmt.Sprintf("  bus: {url: %q, stream: AUTHN, partitions: 2, replica: a}\n", natsCluster.URL()), false, func(r route) string {
			if strings.HasPrefix(r.path, "/api/") || r.path == "/ui/" {
				return closed(r)
			}
			return open[r.method+" "+r.path]
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runServer(t, testConfig(t, tt.server), Options{NoPrune: true})
			waitReady(t, s)
			var got, want []string
			for _, r := range routes {
				req, err := http.NewRequestWithContext(t.Context(), r.method, "http://"+s.Addr()+r.path, strings.NewReader(`{"reason":"test"}`))
				if err != nil {
					t.Fatal(err)
				}
				if tt.token {
					req.Header.Set("Authorization", "Bearer "+testToken)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				answer := fmt.Sprint(resp.StatusCode)
				if strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					answer += " Bearer"
				}
				if r.path == "/api/v1/whoami" && resp.StatusCode == http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					answer += " " + strings.TrimSpace(string(b))
				}
				if r.path == "/api/v1/watch?only=rollouts" && resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Type") != "text/event-stream" {
					answer += " not a stream"
				}
				_ = resp.Body.Close()
				got = append(got, r.method+" "+r.path+": "+answer)
				want = append(want, r.method+" "+r.path+": "+tt.want(r))
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
}

// adminPermissions is what whoami answers for the config's admin token:
// every permission in the default project and the fleet-wide ones.
const adminPermissions = `"permissions":{"*":["stop-line","tokens"],"default":["read","pause","resume","retry","refresh","abort","approve","override","rollback","quarantine"]},"applications":{"podinfo":"default"}`

// A session opened on one replica is taken by another (scale-out mode):
// the cookie needs no shared state, only the same config.
func TestSessionOnAnyReplica(t *testing.T) {
	replica := func(name string) *Server {
		s := runServer(t, testConfig(t, fmt.Sprintf("  bus: {url: %q, stream: SESSION, partitions: 2, replica: %s}\n", natsCluster.URL(), name)), Options{NoPrune: true})
		waitReady(t, s)
		return s
	}
	a, b := replica("a"), replica("b")
	form := url.Values{"token": {testToken}, "next": {"/ui/#/fleet"}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+a.Addr()+"/ui/login", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "flotilla_session" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/#/fleet" || session == nil {
		t.Fatalf("login on a: %s to %q, session %v", resp.Status, resp.Header.Get("Location"), session)
	}
	var got []string
	for _, s := range []*Server{a, b} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+s.Addr()+"/api/v1/whoami", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		got = append(got, fmt.Sprint(resp.StatusCode, " ", strings.TrimSpace(string(body))))
	}
	answer := `200 {"name":"default","via":"session",` + adminPermissions + `}`
	want := []string{answer, answer}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("whoami on a and b (-want +got):\n%s", diff)
	}
}
