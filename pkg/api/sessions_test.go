package api_test

import (
	"context"
	"fmt"
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
	"github.com/flotilla-cd/flotilla/pkg/store"
	"github.com/flotilla-cd/flotilla/pkg/tokens"
)

// A created token logs in to the web UI: its session is kept in the
// state (a real store), carries the token's name and automation, lasts
// until the token expires if that is sooner than 12 hours, and ends when
// the token is revoked, at logout, and at its expiry; the sweep deletes
// the ended ones. Without stored sessions it could not log in at all
// (the cookie of a config token is keyed by a secret a created token's
// record does not hold).
func TestCreatedTokenSessions(t *testing.T) {
	ctx := t.Context()
	s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	reg := tokens.New(s, nil)
	if err := reg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	metrics := prometheus.NewRegistry()
	a, err := api.NewAuthn(map[string]string{"root": "root"}, api.WithTokens(reg), api.WithSessions(s), api.WithClock(clock), api.WithRegisterer(metrics))
	if err != nil {
		t.Fatal(err)
	}
	in2h := now.Add(2 * time.Hour)
	bot, _, err := reg.Create(ctx, tokens.Spec{Name: "bot", By: "root"}, false)
	if err != nil {
		t.Fatal(err)
	}
	robot, _, err := reg.Create(ctx, tokens.Spec{Name: "robot", By: "root", Expires: &in2h, Automation: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitListed(t, reg, "bot", "robot")

	who := func(c *http.Cookie, method string, csrf bool) string {
		req := httptest.NewRequestWithContext(ctx, method, "/api/v1/whoami", nil)
		req.AddCookie(c)
		if csrf {
			req.Header.Set(api.CSRFHeader, "1")
		}
		p, err := a.Authenticate(req)
		if err != nil {
			return "refused: " + err.Error()
		}
		return fmt.Sprintf("%s via %s automation=%v", p.Name, p.Via, p.Automation)
	}
	login := func(secret string) *http.Cookie {
		t.Helper()
		c, _, err := a.Login(ctx, secret, false)
		if err != nil {
			t.Fatalf("login: %v", err)
		}
		return c
	}

	cb, cr := login(bot), login(robot)
	got := []any{cb.Value[:2], len(cb.Value) > 40, cb.MaxAge, cr.MaxAge, cr.Expires.Equal(in2h),
		who(cb, "GET", false), who(cr, "GET", false), who(cb, "POST", false), who(cb, "POST", true)}
	want := []any{"t:", true, 12 * 3600, 2 * 3600, true,
		"bot via session automation=false", "robot via session automation=true",
		"refused: missing X-Flotilla-CSRF header", "bot via session automation=false"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}

	// Revoked: its session is refused at once; a new login too, saying why.
	if _, err := reg.Revoke(ctx, "bot", "root", ""); err != nil {
		t.Fatal(err)
	}
	waitRevoked(t, reg, "bot")
	_, _, loginErr := a.Login(ctx, bot, false)
	// Logged out: the session ends in the state, not only in the browser.
	cr2 := login(robot)
	req := httptest.NewRequestWithContext(ctx, "POST", "/ui/logout", nil)
	req.AddCookie(cr2)
	if _, err := a.Logout(req); err != nil {
		t.Fatal(err)
	}
	got = []any{who(cb, "GET", false), fmt.Sprint(loginErr), who(cr2, "GET", false), who(cr, "GET", false)}
	want = []any{"refused: " + msgStale, "API token bot is revoked", "refused: " + msgStale, "robot via session automation=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after revoke and logout (-want +got):\n%s", diff)
	}

	logins := `
# HELP flotilla_web_logins_total Logins to the web UI: method token (an API token at /ui/login, the config's or a created one) or sso (single sign-on's callback); result succeeded or failed (a wrong, revoked or expired token, a refused or failed sign-on).
# TYPE flotilla_web_logins_total counter
flotilla_web_logins_total{method="sso",result="failed"} 0
flotilla_web_logins_total{method="sso",result="succeeded"} 0
flotilla_web_logins_total{method="token",result="failed"} 1
flotilla_web_logins_total{method="token",result="succeeded"} 3
`
	if err := testutil.GatherAndCompare(metrics, strings.NewReader(logins), "flotilla_web_logins_total"); err != nil {
		t.Error(err)
	}

	// Two hours later robot's session has expired with its token.
	now = in2h
	if got := who(cr, "GET", false); got != "refused: "+msgStale {
		t.Errorf("robot's session at its token's expiry: %s", got)
	}
	n, err := a.SweepSessions(ctx)
	if err != nil || n != 3 {
		t.Errorf("sweep: %d %v, want the 3 sessions (of a revoked token, ended, expired) deleted", n, err)
	}
	n, err = a.SweepSessions(ctx)
	if err != nil || n != 0 {
		t.Errorf("second sweep: %d %v, want none left", n, err)
	}
}

// msgStale is what a session no longer valid is refused with.
const msgStale = "the session has expired or is no longer valid: log in again at /ui/login"

func waitListed(t *testing.T, reg *tokens.Registry, names ...string) {
	t.Helper()
	waitFor(t, func() bool {
		found := 0
		for _, tk := range reg.List() {
			for _, n := range names {
				if tk.Name == n {
					found++
				}
			}
		}
		return found == len(names)
	})
}

func waitRevoked(t *testing.T, reg *tokens.Registry, name string) {
	t.Helper()
	waitFor(t, func() bool {
		for _, tk := range reg.List() {
			if tk.Name == name && tk.RevokedAt != nil {
				return true
			}
		}
		return false
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("timed out waiting for the token registry")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
