package features

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/events"
)

// Authentication (#31 step 1): every read, the watch stream and the web
// UI need an identity, an API token (Authorization: Bearer) or the web
// UI's session cookie, unless server.anonymousRead opens the reads; a
// control always needs one, and one authenticated by the cookie needs the
// X-Flotilla-CSRF header too. These steps read flotilla's answers as any
// client gets them: status, headers and body, the browser, the CLI's
// output.

func (s *scenario) registerAuthnSteps(sc *godog.ScenarioContext) {
	sc.Step(`^an API token named "([^"]*)"$`, s.namedToken)
	sc.Step(`^flotilla lets anyone read without credentials \(server\.anonymousRead\)$`, s.anonymousRead)
	sc.Step(`^without credentials flotilla's API, its watch stream and the web UI's pages answer 401, saying how to authenticate$`, s.readsRefused)
	sc.Step(`^without credentials /healthz, /readyz and /metrics answer$`, s.openRoutesAnswer)
	sc.Step(`^with the API token flotilla's API, its watch stream and the web UI's pages answer$`, s.readsWithToken)
	sc.Step(`^without credentials flotilla's API, its watch stream and the web UI's pages answer, the API listing the rollout of "([^"]*)"$`, s.readsAnonymous)
	sc.Step(`^stopping the fleet without credentials is refused with 401$`, s.stopWithoutCredentials)
	sc.Step(`^stopping the fleet with an unknown API token is refused with 401$`, s.stopWithUnknownToken)
	sc.Step(`^the fleet is still running, and no stop of the fleet was journaled$`, s.fleetStillRunning)
	sc.Step("^`flotilla get rollouts` without a token fails saying to set --token or FLOTILLA_TOKEN$", s.cliWithoutToken)
	sc.Step("^`flotilla get rollouts` without a token lists the rollout of \"([^\"]*)\"$", s.cliAnonymousLists)
	sc.Step(`^"([^"]*)" logs in at /ui/login with (?:her|his|their) API token, getting a session cookie$`, s.loginForCookie)
	sc.Step(`^with that cookie flotilla's API reads the rollouts and names "([^"]*)" as who asks, without the X-Flotilla-CSRF header$`, s.cookieReads)
	sc.Step(`^with that cookie and without the X-Flotilla-CSRF header stopping the fleet is refused with 403$`, s.cookieControlRefused)
	sc.Step(`^with that cookie and the X-Flotilla-CSRF header stopping the fleet is recorded as done by "([^"]*)"$`, s.cookieControlWithCSRF)
	sc.Step(`^the web UI is opened in a browser without logging in$`, s.openUIAnonymously)
	sc.Step(`^the web UI shows its login form, asking for an API token, and no rollouts$`, s.uiShowsLogin)
	sc.Step(`^"([^"]*)" logs in to the web UI with a wrong token$`, s.uiLoginWrong)
	sc.Step(`^the web UI says "([^"]*)" on its login form$`, s.uiLoginError)
	sc.Step(`^"([^"]*)" logs in to the web UI with (?:her|his|their) API token$`, s.uiLoginAs)
	sc.Step(`^the web UI lists the rollout of "([^"]*)" and names "([^"]*)" as who is logged in$`, s.uiListsAs)
	sc.Step(`^"([^"]*)" logs out of the web UI$`, s.uiLogout)
	sc.Step(`^the web UI shows its login form again, also when the rollouts page is opened again$`, s.uiLoginAgain)
	sc.Step(`^"([^"]*)" logs in from the web UI's login link and opens the rollout of "([^"]*)"$`, s.uiLoginFromLink)
	s.registerFailureLimitSteps(sc)
}

func (s *scenario) namedToken(name string) error {
	if s.w == nil {
		return errors.New("no scenario world: a registry step must come first")
	}
	if s.w.approverTokens == nil {
		s.w.approverTokens = map[string]string{}
	}
	s.w.approverTokens[name] = randomHex(16)
	return nil
}

func (s *scenario) anonymousRead() error {
	if s.w == nil {
		return errors.New("no scenario world: a registry step must come first")
	}
	s.w.anonymousRead = true
	return nil
}

// answer is one HTTP answer of flotilla as a client sees it.
type answer struct {
	status int
	header http.Header
	body   string
	cookie []*http.Cookie
}

// call sends one request to the scenario's flotilla, following no
// redirect. A watch stream's body is not read past its headers: it does not
// end.
func (s *scenario) call(ctx context.Context, method, path string, header http.Header, body []byte) (answer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.w.flotilla.url()+path, rd)
	if err != nil {
		return answer{}, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	a := answer{status: resp.StatusCode, header: resp.Header, cookie: resp.Cookies()}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return a, nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	a.body = string(b)
	return a, err
}

// callBusy is call asked again, for up to 30 s, while flotilla answers
// 502, 503 or 504 (a scale-out replica whose NATS is busy) or refuses the
// connection (its Service still routing to the pod an upgrade just
// replaced), as a client would.
func (s *scenario) callBusy(ctx context.Context, method, path string, header http.Header, body []byte) (answer, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := s.call(ctx, method, path, header, body)
		busy := a.status == http.StatusBadGateway || a.status == http.StatusServiceUnavailable || a.status == http.StatusGatewayTimeout ||
			errors.Is(err, syscall.ECONNREFUSED)
		if !busy || ctx.Err() != nil || time.Now().After(deadline) {
			return a, err
		}
		time.Sleep(time.Second)
	}
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// readPaths are what a reader of flotilla reads: the API, the watch
// stream, the web UI's pages.
var readPaths = []string{
	"/api/v1/rollouts", "/api/v1/applications", "/api/v1/clusters", "/api/v1/fleet", "/api/v1/whoami",
	"/api/v1/watch", "/api/v1/watch?only=rollouts", "/ui/",
}

func isUI(path string) bool { return strings.HasPrefix(path, "/ui/") }

// readsRefused asks every read without credentials: each answers 401; the
// API's with WWW-Authenticate: Bearer and a JSON error naming the header
// to send, the web UI's with the login page.
func (s *scenario) readsRefused(ctx context.Context) error {
	var problems []string
	for _, p := range readPaths {
		a, err := s.callBusy(ctx, http.MethodGet, p, nil, nil)
		if err != nil {
			return err
		}
		if a.status != http.StatusUnauthorized {
			problems = append(problems, fmt.Sprintf("GET %s answered %d, want 401: %.200s", p, a.status, a.body))
			continue
		}
		if isUI(p) {
			if !strings.HasPrefix(a.header.Get("Content-Type"), "text/html") || !strings.Contains(a.body, `id="login-form"`) ||
				!strings.Contains(a.body, `id="login-token"`) || !strings.Contains(a.body, `id="login-submit"`) {
				problems = append(problems, fmt.Sprintf("GET %s answered 401 %s without the login form:\n%.500s", p, a.header.Get("Content-Type"), a.body))
			}
			continue
		}
		var e struct{ Error string }
		if a.header.Get("WWW-Authenticate") != `Bearer realm="flotilla"` || json.Unmarshal([]byte(a.body), &e) != nil ||
			!strings.Contains(e.Error, "Authorization: Bearer") {
			problems = append(problems, fmt.Sprintf("GET %s answered 401 with WWW-Authenticate %q and %q, want Bearer realm=\"flotilla\" and an error naming Authorization: Bearer",
				p, a.header.Get("WWW-Authenticate"), a.body))
		}
	}
	if problems != nil {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

func (s *scenario) openRoutesAnswer(ctx context.Context) error {
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/ui/login"} {
		a, err := s.callBusy(ctx, http.MethodGet, p, nil, nil)
		if err != nil {
			return err
		}
		if a.status != http.StatusOK {
			return fmt.Errorf("GET %s without credentials answered %d, want 200: %.200s", p, a.status, a.body)
		}
	}
	return nil
}

// readsAnswer asks every read with header: each answers 200, the watch
// stream as Server-Sent Events, the web UI's pages its HTML (not the
// login form).
func (s *scenario) readsAnswer(ctx context.Context, header http.Header) error {
	var problems []string
	for _, p := range readPaths {
		a, err := s.callBusy(ctx, http.MethodGet, p, header, nil)
		if err != nil {
			return err
		}
		switch {
		case a.status != http.StatusOK:
			problems = append(problems, fmt.Sprintf("GET %s answered %d, want 200: %.200s", p, a.status, a.body))
		case strings.HasPrefix(p, "/api/v1/watch") && !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream"):
			problems = append(problems, fmt.Sprintf("GET %s answered %s, want text/event-stream", p, a.header.Get("Content-Type")))
		case isUI(p) && (!strings.Contains(a.body, `id="main"`) || strings.Contains(a.body, `id="login-form"`)):
			problems = append(problems, fmt.Sprintf("GET %s answered no web UI page:\n%.500s", p, a.body))
		}
	}
	if problems != nil {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

func (s *scenario) readsWithToken(ctx context.Context) error {
	return s.readsAnswer(ctx, bearer(s.w.apiToken))
}

func (s *scenario) readsAnonymous(ctx context.Context, version string) error {
	if err := s.readsAnswer(ctx, nil); err != nil {
		return err
	}
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	a, err := s.callBusy(ctx, http.MethodGet, "/api/v1/rollouts", nil, nil)
	if err != nil {
		return err
	}
	var ros []struct{ ID string }
	if err := json.Unmarshal([]byte(a.body), &ros); err != nil {
		return fmt.Errorf("GET /api/v1/rollouts: %w: %.200s", err, a.body)
	}
	for _, r := range ros {
		if r.ID == id {
			return nil
		}
	}
	return fmt.Errorf("GET /api/v1/rollouts without credentials lists %+v, not %s", ros, id)
}

// stopFleet asks flotilla to stop the fleet with header.
func (s *scenario) stopFleet(ctx context.Context, header http.Header) (answer, error) {
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range header {
		h[k] = v
	}
	return s.call(ctx, http.MethodPost, "/api/v1/fleet/stop", h, []byte(`{"reason":"features: authentication"}`))
}

func (s *scenario) stopWithoutCredentials(ctx context.Context) error {
	return s.stopRefused(ctx, nil, "")
}

func (s *scenario) stopWithUnknownToken(ctx context.Context) error {
	return s.stopRefused(ctx, bearer("not-"+s.w.apiToken), "unknown API token")
}

func (s *scenario) stopRefused(ctx context.Context, header http.Header, reason string) error {
	a, err := s.stopFleet(ctx, header)
	if err != nil {
		return err
	}
	if a.status != http.StatusUnauthorized || a.header.Get("WWW-Authenticate") == "" || !strings.Contains(a.body, reason) {
		return fmt.Errorf("POST /api/v1/fleet/stop answered %d (WWW-Authenticate %q): %s; want 401 saying %q", a.status, a.header.Get("WWW-Authenticate"), a.body, reason)
	}
	return nil
}

// fleetStillRunning reads the fleet's state (with the API token) and the
// journal's events: the line was not stopped.
func (s *scenario) fleetStillRunning(ctx context.Context) error {
	// A stop journaled would reach the state and the sink in well under
	// this.
	time.Sleep(2 * time.Second)
	var st struct {
		Stopped bool
		By      string
	}
	if err := s.getJSON(ctx, "/api/v1/fleet", &st); err != nil {
		return err
	}
	if st.Stopped {
		return fmt.Errorf("the fleet is stopped, by %q", st.By)
	}
	for _, e := range s.w.sink.all() {
		if e.Type() == events.TypeFleetStopRequested {
			return fmt.Errorf("a stop of the fleet was journaled: %s", e.Data())
		}
	}
	return nil
}

// cliNoToken runs a flotilla command against the scenario's flotilla with
// no FLOTILLA_TOKEN in its environment.
func (s *scenario) cliNoToken(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, flotillaBin, append(args, "--server", s.w.flotilla.url())...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLOTILLA_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (s *scenario) cliWithoutToken(ctx context.Context) error {
	out, errOut, err := s.cliNoToken(ctx, "get", "rollouts")
	var exit *exec.ExitError
	want := "flotilla answered 401: set --token or FLOTILLA_TOKEN (an API token of the server)"
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(errOut, want) {
		return fmt.Errorf("flotilla get rollouts without a token: %w, stdout %q, stderr %q; want exit 1 saying %q", err, out, errOut, want)
	}
	return nil
}

func (s *scenario) cliAnonymousLists(ctx context.Context, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	out, errOut, err := s.cliNoToken(ctx, "get", "rollouts")
	if err != nil || !strings.Contains(out, id) {
		return fmt.Errorf("flotilla get rollouts without a token: %w, stdout %q, stderr %q; want %s listed", err, out, errOut, id)
	}
	return nil
}

// loginForCookie posts the login form as a browser does and keeps the
// session cookie flotilla sets: HttpOnly, SameSite=Strict, for every path,
// and not the token itself.
func (s *scenario) loginForCookie(ctx context.Context, who string) error {
	tok, ok := s.w.approverTokens[who]
	if !ok {
		return fmt.Errorf("no API token named %q", who)
	}
	form := url.Values{"token": {tok}, "next": {"/ui/"}}
	a, err := s.call(ctx, http.MethodPost, "/ui/login", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, []byte(form.Encode()))
	if err != nil {
		return err
	}
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/ui/" {
		return fmt.Errorf("POST /ui/login answered %d to %q, want 303 to /ui/: %.300s", a.status, a.header.Get("Location"), a.body)
	}
	for _, c := range a.cookie {
		if c.Name != "flotilla_session" {
			continue
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || strings.Contains(c.Value, tok) {
			return fmt.Errorf("the session cookie %q: HttpOnly %v, SameSite %v, Path %q; want HttpOnly, Strict, / and no token in it", c.Raw, c.HttpOnly, c.SameSite, c.Path)
		}
		s.w.session = c
		return nil
	}
	return fmt.Errorf("POST /ui/login set no flotilla_session cookie: %v", a.header.Values("Set-Cookie"))
}

func (s *scenario) sessionHeader() (http.Header, error) {
	if s.w.session == nil {
		return nil, errors.New("no session cookie: a step logging in must come first")
	}
	return http.Header{"Cookie": {s.w.session.Name + "=" + s.w.session.Value}}, nil
}

func (s *scenario) cookieReads(ctx context.Context, who string) error {
	h, err := s.sessionHeader()
	if err != nil {
		return err
	}
	if err := s.readsAnswer(ctx, h); err != nil {
		return err
	}
	a, err := s.callBusy(ctx, http.MethodGet, "/api/v1/whoami", h, nil)
	if err != nil {
		return err
	}
	var me struct{ Name, Via string }
	if err := json.Unmarshal([]byte(a.body), &me); err != nil || me.Name != who || me.Via != "session" {
		return fmt.Errorf("GET /api/v1/whoami with the cookie answered %d %s, want %s via session", a.status, a.body, who)
	}
	return nil
}

func (s *scenario) cookieControlRefused(ctx context.Context) error {
	h, err := s.sessionHeader()
	if err != nil {
		return err
	}
	a, err := s.stopFleet(ctx, h)
	if err != nil {
		return err
	}
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "X-Flotilla-CSRF") {
		return fmt.Errorf("POST /api/v1/fleet/stop with the cookie and no X-Flotilla-CSRF answered %d: %s; want 403 naming the header", a.status, a.body)
	}
	return nil
}

// cookieControlWithCSRF stops the fleet as the web UI does (the cookie and
// the header), and reads the fleet stopped by who, and the stop journaled.
func (s *scenario) cookieControlWithCSRF(ctx context.Context, who string) error {
	h, err := s.sessionHeader()
	if err != nil {
		return err
	}
	h.Set("X-Flotilla-CSRF", "1")
	a, err := s.stopFleet(ctx, h)
	if err != nil {
		return err
	}
	var res struct{ By string }
	if a.status/100 != 2 || json.Unmarshal([]byte(a.body), &res) != nil || res.By != who {
		return fmt.Errorf("POST /api/v1/fleet/stop with the cookie and X-Flotilla-CSRF answered %d: %s; want 2xx by %s", a.status, a.body, who)
	}
	if _, err := s.w.sink.waitFor(ctx, "the fleet's stop", func(e cloudevents.Event) bool {
		return e.Type() == events.TypeFleetStopRequested
	}); err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var st struct {
			Stopped bool
			By      string
		}
		if err := s.getJSON(ctx, "/api/v1/fleet", &st); err != nil {
			return err
		}
		if st.Stopped && strings.HasPrefix(st.By, who) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("30 s after the stop GET /api/v1/fleet says %+v, want stopped by %s", st, who)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The browser's steps: a person at the login page.

func (s *scenario) openUIAnonymously(ctx context.Context) error {
	b, err := s.startBrowser(ctx)
	if err != nil {
		return err
	}
	return b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/"))
}

// loginForm is true when the page shows the login form.
const loginForm = `document.querySelector('#login-form #login-token') && document.querySelector('#login-form #login-submit')`

func (s *scenario) uiShowsLogin(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the login form and no rollouts", loginForm+` && !document.querySelector('#rollouts')`)
}

func (s *scenario) uiLoginWrong(ctx context.Context, _ string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	return b.login(ctx, "not-"+s.w.apiToken)
}

func (s *scenario) uiLoginError(ctx context.Context, msg string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the login form saying "+msg,
		fmt.Sprintf(`%s && document.querySelector('#login-error') && document.querySelector('#login-error').textContent.includes(%q)`, loginForm, msg))
}

func (s *scenario) uiLoginAs(ctx context.Context, who string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	tok, ok := s.w.approverTokens[who]
	if !ok {
		return fmt.Errorf("no API token named %q", who)
	}
	if err := b.login(ctx, tok); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the page is live", `document.body.dataset.live === "true"`)
}

// whoami is the condition that the header names who as logged in.
func whoami(who string) string {
	return fmt.Sprintf(`document.querySelector('#whoami') && document.querySelector('#whoami').textContent.trim() === %q`, who)
}

func (s *scenario) uiListsAs(ctx context.Context, version, who string) error {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the rollout list holds "+id+" and the header names "+who,
		fmt.Sprintf(`document.querySelector('#rollouts tr[data-rollout=%q]') && %s && document.querySelector('#logout')`, id, whoami(who)))
}

func (s *scenario) uiLogout(ctx context.Context, _ string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	return b.click(ctx, "#logout")
}

func (s *scenario) uiLoginAgain(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the login form after logging out", loginForm+` && !document.querySelector('#rollouts')`); err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/")); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the login form when the rollouts are opened again", loginForm+` && !document.querySelector('#rollouts')`)
}

// uiLoginFromLink follows the header's login link of a page read
// anonymously, logs in as who and opens the rollout of version.
func (s *scenario) uiLoginFromLink(ctx context.Context, who, version string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.click(ctx, "#login-link"); err != nil {
		return err
	}
	if err := s.uiLoginAs(ctx, who); err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the header names "+who, whoami(who)); err != nil {
		return err
	}
	_, _, err = s.openRollout(ctx, version)
	return err
}
