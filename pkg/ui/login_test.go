package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// page is what the table compares of an answer.
type page struct {
	Status   int
	Location string // where a redirect goes
	Login    bool   // the login form
	Next     string // the form's next
	Error    string // the form's #login-error
	Cookie   string // Set-Cookie of flotilla_session: "set" or "cleared"
	Body     string // the start of another answer
}

var (
	nextField  = regexp.MustCompile(`<input type="hidden" name="next" value="([^"]*)">`)
	loginError = regexp.MustCompile(`<p id="login-error"[^>]*>([^<]*)</p>`)
)

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := string(b)
	p := page{Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	if strings.Contains(body, `<form id="login-form" method="post" action="/ui/login">`) &&
		strings.Contains(body, `<input id="login-token" name="token" type="password"`) && strings.Contains(body, `<button id="login-submit" type="submit">`) {
		p.Login = true
		if m := nextField.FindStringSubmatch(body); m != nil {
			p.Next = m[1]
		}
		if m := loginError.FindStringSubmatch(body); m != nil {
			p.Error = m[1]
		}
		if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("Cache-Control") != "no-store" {
			p.Body = "no CSP or cache control on the login page"
		}
	} else {
		p.Body, _, _ = strings.Cut(body, "\n")
	}
	for _, c := range resp.Cookies() {
		if c.Name != api.SessionCookie {
			continue
		}
		switch {
		case c.MaxAge < 0:
			p.Cookie = "cleared"
		case c.HttpOnly && c.SameSite == http.SameSiteStrictMode && c.Path == "/" && c.Value != "":
			p.Cookie = "set"
		default:
			p.Cookie = "bad: " + c.String()
		}
	}
	return p
}

// noRedirects is a client that shows redirects rather than following them.
func noRedirects() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// session logs in with token through the form and returns the cookie.
func session(t *testing.T, base, tok string) *http.Cookie {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirects().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	for _, c := range resp.Cookies() {
		if c.Name == api.SessionCookie {
			return c
		}
	}
	t.Fatalf("login with %q set no session (%d)", tok, resp.StatusCode)
	return nil
}

// TestPagesNeedAnIdentity: the UI's pages answer 401 with the login page
// without a credential (or with a stale one); its assets and the login
// page are open.
func TestPagesNeedAnIdentity(t *testing.T) {
	now := time.Now()
	srv, _ := serve(t, api.WithClock(func() time.Time { return now }))
	open, _ := serve(t, api.AnonymousRead(true))
	valid := session(t, srv.URL, token)
	// Sessions this server did not make, or no longer takes.
	other, _ := serve(t)
	foreign := session(t, other.URL, token) // the same token: valid here too
	stale := func(at time.Time, tokens map[string]string, tok string) *http.Cookie {
		a, err := api.NewAuthn(tokens, api.WithClock(func() time.Time { return at }))
		if err != nil {
			t.Fatal(err)
		}
		c, _, err := a.Login(context.Background(), tok, false)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	expired := stale(now.Add(-13*time.Hour), map[string]string{"ops": token}, token)
	removed := stale(now, map[string]string{"gone": "g"}, "g")
	tampered := &http.Cookie{Name: api.SessionCookie, Value: strings.Replace(valid.Value, "ops.", "ops.9", 1)}

	loginPage := func(status int, next, msg string) page {
		return page{Status: status, Login: true, Next: next, Error: msg}
	}
	index := page{Status: 200, Body: "<!doctype html>"}
	const ended = "Your session has expired or is no longer valid: log in again."
	tests := []struct {
		name   string
		srv    string
		path   string
		header http.Header
		cookie *http.Cookie
		want   page
	}{
		{"page, none", srv.URL, "/ui/", nil, nil, loginPage(401, "/ui/", "")},
		{"page by name, none", srv.URL, "/ui/index.html", nil, nil, loginPage(401, "/ui/index.html", "")},
		{"page, bearer", srv.URL, "/ui/", bearer, nil, index},
		{"page, unknown bearer", srv.URL, "/ui/", http.Header{"Authorization": {"Bearer nope"}}, nil, loginPage(401, "/ui/", "")},
		{"page, session", srv.URL, "/ui/", nil, valid, index},
		{"page, session of another replica", srv.URL, "/ui/", nil, foreign, index},
		{"page, expired session", srv.URL, "/ui/", nil, expired, loginPage(401, "/ui/", ended)},
		{"page, tampered session", srv.URL, "/ui/", nil, tampered, loginPage(401, "/ui/", ended)},
		{"page, session of a removed token", srv.URL, "/ui/", nil, removed, loginPage(401, "/ui/", ended)},
		{"page, reads open", open.URL, "/ui/", nil, nil, index},
		{"script, none", srv.URL, "/ui/app.js", nil, nil, page{Status: 200, Body: "// flotilla's web UI: rollouts, one rollout as waves x clusters with its"}},
		{"login script, none", srv.URL, "/ui/login.js", nil, nil, page{Status: 200, Body: "// The login page: a page asked for without a session shows this form, and"}},
		{"stylesheet, none", srv.URL, "/ui/app.css", nil, nil, page{Status: 200, Body: ":root{--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--panel:#f6f8fa;--link:#0550ae;"}},
		{"unknown asset, none", srv.URL, "/ui/nope.js", nil, nil, page{Status: 404, Body: "404 page not found"}},
		{"login page", srv.URL, "/ui/login", nil, nil, loginPage(200, "/ui/", "")},
		{"login page, next", srv.URL, "/ui/login?next=" + url.QueryEscape("/ui/#/rollouts/r1"), nil, nil, loginPage(200, "/ui/#/rollouts/r1", "")},
		{"login page, next elsewhere", srv.URL, "/ui/login?next=https://evil.example", nil, nil, loginPage(200, "/ui/", "")},
		{"whoami, none", srv.URL, "/api/v1/whoami", nil, nil, page{Status: 401, Body: `{"error":"this call needs an API token: send Authorization: Bearer \u003ctoken\u003e (server.apiTokens), or set server.anonymousRead: true to open reads"}`}},
		{"whoami, session", srv.URL, "/api/v1/whoami", nil, valid, page{Status: 200, Body: `{"name":"ops","via":"session",` + allPermissions + `}`}},
		{"whoami, bearer", srv.URL, "/api/v1/whoami", bearer, nil, page{Status: 200, Body: `{"name":"ops","via":"token",` + allPermissions + `}`}},
		{"whoami, reads open", open.URL, "/api/v1/whoami", nil, nil, page{Status: 200, Body: `{"name":"anonymous","via":"anonymous","permissions":{"default":["read"]},"applications":{}}`}},
		{"root", srv.URL, "/", nil, nil, page{Status: 302, Location: "/ui/", Body: `<a href="/ui/">Found</a>.`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.srv+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header[k] = v
			}
			if tt.cookie != nil {
				req.AddCookie(&http.Cookie{Name: tt.cookie.Name, Value: tt.cookie.Value})
			}
			resp, err := noRedirects().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			if diff := cmp.Diff(tt.want, read(t, resp)); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

// TestLogin: the form logs in with an API token and goes on to a page of
// the UI, never elsewhere; a wrong token sets nothing; the logout ends the
// session.
func TestLogin(t *testing.T) {
	srv, _ := serve(t)
	tests := []struct {
		name   string
		form   url.Values
		header http.Header
		want   page
	}{
		{"token", url.Values{"token": {token}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"token and next", url.Values{"token": {token}, "next": {"/ui/#/rollouts/r1"}}, nil, page{Status: 303, Location: "/ui/#/rollouts/r1", Cookie: "set"}},
		{"next with a query", url.Values{"token": {token}, "next": {"/ui/?x=1#/fleet"}}, nil, page{Status: 303, Location: "/ui/?x=1#/fleet", Cookie: "set"}},
		{"next, another site", url.Values{"token": {token}, "next": {"https://evil.example/ui/"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, scheme-relative", url.Values{"token": {token}, "next": {"//evil.example/ui/"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, backslash", url.Values{"token": {token}, "next": {`/\evil.example`}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, backslash under the UI", url.Values{"token": {token}, "next": {`/ui/\/evil.example`}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, dot-dot out of the UI", url.Values{"token": {token}, "next": {"/ui/..//evil.example"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, javascript", url.Values{"token": {token}, "next": {"javascript:alert(1)"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, a header in it", url.Values{"token": {token}, "next": {"/ui/\r\nSet-Cookie: x=y"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, the API", url.Values{"token": {token}, "next": {"/api/v1/rollouts"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"next, the login", url.Values{"token": {token}, "next": {"/ui/login"}}, nil, page{Status: 303, Location: "/ui/", Cookie: "set"}},
		{"wrong token", url.Values{"token": {"nope"}, "next": {"/ui/#/fleet"}}, nil, page{Status: 401, Login: true, Next: "/ui/#/fleet", Error: "unknown API token"}},
		{"no token", url.Values{}, nil, page{Status: 401, Login: true, Next: "/ui/", Error: "unknown API token"}},
		{"from another site", url.Values{"token": {token}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}, page{Status: 403, Login: true, Next: "/ui/", Error: "A login from another site is refused."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/ui/login", strings.NewReader(tt.form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tt.header {
				req.Header[k] = v
			}
			resp, err := noRedirects().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			got := read(t, resp)
			got.Body = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("POST /ui/login %v (-want +got):\n%s", tt.form, diff)
			}
		})
	}

	// The session opens the pages and the API's reads; its controls need
	// the CSRF header; the logout clears it.
	c := session(t, srv.URL, token)
	do := func(method, path string, csrf bool) page {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(c)
		if csrf {
			req.Header.Set(api.CSRFHeader, "1")
		}
		resp, err := noRedirects().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		return read(t, resp)
	}
	got := []page{do("GET", "/ui/", false), do("GET", "/api/v1/whoami", false), do("POST", "/api/v1/fleet/stop", false), do("POST", "/ui/logout", false)}
	want := []page{
		{Status: 200, Body: "<!doctype html>"},
		{Status: 200, Body: `{"name":"ops","via":"session",` + allPermissions + `}`},
		{Status: 403, Body: `{"error":"missing X-Flotilla-CSRF header"}`},
		{Status: 303, Location: "/ui/login", Cookie: "cleared"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("with the session (-want +got):\n%s", diff)
	}
}

// The page names who is logged in and logs out; its script sends the
// CSRF header and keeps no token (the session is an HttpOnly cookie).
func TestPageCarriesNoToken(t *testing.T) {
	srv, _ := serve(t)
	_, index := fetch(t, srv.URL+"/ui/", bearer)
	_, script := fetch(t, srv.URL+"/ui/app.js", nil)
	has := func(body []byte, s string) bool { return strings.Contains(string(body), s) }
	got := map[string]bool{
		"#whoami":                      has(index, `<span id="whoami"`),
		"#logout posts to /ui/logout":  has(index, `<form id="logout-form" method="post" action="/ui/logout" hidden><button id="logout" type="submit">`),
		"#login-link":                  has(index, `<a id="login-link" href="/ui/login" hidden>`),
		"a token dialog":               has(index, "token-dialog"),
		"sends X-Flotilla-CSRF":        has(script, `"X-Flotilla-CSRF": "1"`),
		"reads whoami":                 has(script, `"/api/v1/whoami"`),
		"keeps a token in the browser": has(script, "sessionStorage") || has(script, "localStorage"),
		"sends Authorization":          has(script, "Authorization"),
	}
	want := map[string]bool{
		"#whoami": true, "#logout posts to /ui/logout": true, "#login-link": true, "a token dialog": false,
		"sends X-Flotilla-CSRF": true, "reads whoami": true, "keeps a token in the browser": false, "sends Authorization": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// allPermissions is whoami's answer of what a token may do without
// projects and rbac: everything.
const allPermissions = `"permissions":{"*":["stop-line","tokens"],"default":["read","pause","resume","retry","refresh","abort","approve","override","rollback","quarantine"]},"applications":{}`
