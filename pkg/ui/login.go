package ui

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/flotilla-cd/flotilla/pkg/identity"
)

// Auth is what the UI needs of the API's authentication (pkg/api's Authn).
type Auth interface {
	// Authenticate finds who a request comes from; an error refuses it.
	Authenticate(r *http.Request) (identity.Principal, error)
	// Login opens a session of the API token whose secret is secret: the
	// cookie to set (Secure when secure).
	Login(ctx context.Context, secret string, secure bool) (*http.Cookie, identity.Principal, error)
	// Logout ends r's session and is the cookie that drops it.
	Logout(r *http.Request) (*http.Cookie, error)
}

const (
	// LoginPath serves the login form (GET) and logs in (POST: form fields
	// token and next).
	LoginPath = Path + "login"
	// LogoutPath ends the session (POST).
	LogoutPath = Path + "logout"
	// sessionCookie is the cookie a session is kept in (pkg/api's
	// SessionCookie): a page refused with one says the session ended.
	sessionCookie = "flotilla_session"
)

// loginCSP: the login page loads the stylesheet and its script
// (login.js) and posts its form to flotilla, nothing else.
const loginCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>flotilla: log in</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/app.css">
<script src="/ui/login.js" defer></script>
</head>
<body>
<header>
  <nav aria-label="Main"><a class="brand" href="/ui/">flotilla</a></nav>
</header>
<main id="main" class="login">
  <h1>Log in</h1>
  {{if .SSO}}<p><a id="login-sso" class="button" href="/auth/login?next={{.Next}}">Log in with SSO</a></p>{{end}}
  <p class="muted">{{if .SSO}}Or w{{else}}W{{end}}ith one of this flotilla's API tokens (<code>server.apiTokens</code>, or one made by <code>flotilla token create</code>). The session lasts 12 hours, in this browser only.</p>
  {{if .Error}}<p id="login-error" class="reason" role="alert">{{.Error}}</p>{{end}}
  <form id="login-form" method="post" action="/ui/login">
    <input type="hidden" name="next" value="{{.Next}}">
    <label for="login-token">API token</label>
    <input id="login-token" name="token" type="password" autocomplete="current-password" spellcheck="false" required autofocus>
    <button id="login-submit" type="submit">Log in</button>
  </form>
</main>
</body>
</html>
`))

// loginForm serves the login page.
func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.writeLogin(w, http.StatusOK, safeNext(r.URL.Query().Get("next")), "")
}

// refused answers a page refused for want of an identity: 401 and the
// login page, which comes back to the page.
func (h *Handler) refused(w http.ResponseWriter, r *http.Request, _ error) {
	msg := ""
	if _, err := r.Cookie(sessionCookie); err == nil {
		msg = "Your session has expired or is no longer valid: log in again."
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="flotilla"`)
	h.writeLogin(w, http.StatusUnauthorized, safeNext(r.URL.RequestURI()), msg)
}

// login opens a session for the API token posted and goes on to next.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	// A cross-site form must not log a browser in (as someone else).
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		h.writeLogin(w, http.StatusForbidden, Path, "A login from another site is refused.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		h.writeLogin(w, http.StatusBadRequest, Path, "The form could not be read.")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	c, p, err := h.auth.Login(r.Context(), r.PostForm.Get("token"), r.TLS != nil)
	if err != nil {
		h.log.InfoContext(r.Context(), "web UI login refused", "remote", r.RemoteAddr, "error", err)
		h.writeLogin(w, http.StatusUnauthorized, next, err.Error())
		return
	}
	h.log.InfoContext(r.Context(), "web UI login", "name", p.Name, "remote", r.RemoteAddr)
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session and shows the login page.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if h.sso { // ends either kind of session, in the state port too
		http.Redirect(w, r, ssoLogoutPath, http.StatusTemporaryRedirect)
		return
	}
	c, err := h.auth.Logout(r)
	if err != nil { // the cookie still goes: the session expires in the state
		h.log.ErrorContext(r.Context(), "ending a web session", "error", err)
	}
	http.SetCookie(w, c)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, LoginPath, http.StatusSeeOther)
}

func (h *Handler) writeLogin(w http.ResponseWriter, status int, next, msg string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", loginCSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, struct {
		Next, Error string
		SSO         bool
	}{next, msg, h.sso})
}

// safeNext is where a login goes on to: next if it is a page of the UI
// (never another site: "https://evil", "//evil", "/ui/..//evil"), else
// Path.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Path) || strings.HasPrefix(next, LoginPath) ||
		strings.IndexFunc(next, func(c rune) bool { return c < ' ' || c == '\\' || c == 0x7f }) >= 0 {
		return Path
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(path.Clean(u.Path)+"/", Path) {
		return Path
	}
	return next
}
