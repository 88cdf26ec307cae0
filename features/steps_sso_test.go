package features

// Single sign-on (#31 item 2, features/sso.feature): a real OpenID
// provider (pkg/testkit/oidcop), the web UI's login through it in
// headless Chromium, and `flotilla login --sso`'s device flow.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/cucumber/godog"
	"github.com/nats-io/nats.go/jetstream"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/identity"
	"github.com/flotilla-cd/flotilla/pkg/testkit/oidcop"
)

// ssoWorld is the scenario's provider and what its steps keep.
type ssoWorld struct {
	users    []oidcop.User
	provider *oidcop.Provider
	projects []map[string]any
	// cliConfig is the CLI's config file (FLOTILLA_CLI_CONFIG); login the
	// output of `flotilla login --sso`.
	cliConfig string
	login     string
	// lifetime is the provider's ID token lifetime (0: its default).
	lifetime time.Duration
	// forged is the status the browser login's callback answered a
	// redirect with another state (0: none sent).
	forged int
	// before is the CLI's login when its ID token expired, and refreshes
	// the provider's count of alice's refreshes then.
	before    map[string]any
	refreshes int
	// refused are the scopes the provider refuses (oidcop.RefuseScopes);
	// noOffline sets server.sso.offlineAccess: false.
	refused   []string
	noOffline bool
}

const ssoPassword = "correct horse battery staple"

func (s *scenario) registerSSOSteps(sc *godog.ScenarioContext) {
	sc.Step(`^an OpenID provider where "([^"]*)" is in group "([^"]*)" and "([^"]*)" in group "([^"]*)"$`, s.ssoProvider)
	sc.Step(`^the application "([^"]*)" is in project "([^"]*)", where group "([^"]*)" is a viewer and group "([^"]*)" an approver$`, s.ssoProject)
	sc.Step(`^wave (\d+) needs one approval$`, s.ssoWaveNeedsOne)
	sc.Step(`^"([^"]*)" logs in to the web UI through the OpenID provider$`, s.ssoUILogin)
	sc.Step(`^the web UI names "([^"]*)" as who is logged in, and its session cookie is HttpOnly and SameSite=Lax$`, s.ssoUINames)
	sc.Step(`^the web UI's session reads the application "([^"]*)" and not "([^"]*)", which the automation's token reads$`, s.ssoUIReadsOnly)
	sc.Step(`^the web UI's rollout of "([^"]*)" offers "([^"]*)" no control, saying the roles grant none in project "([^"]*)"$`, s.ssoUINoControl)
	sc.Step(`^(aborting|rolling back) the rollout of "([^"]*)" with the web UI's session is refused with 403 naming the (abort|rollback) permission$`, s.ssoControlRefused)
	sc.Step(`^the OpenID provider also has "([^"]*)" in group "([^"]*)"$`, s.ssoAlsoUser)
	sc.Step(`^project "([^"]*)" grants group "([^"]*)" the custom role "([^"]*)" with the permissions "([^"]*)"$`, s.ssoCustomRole)
	sc.Step(`^the web UI's rollout of "([^"]*)" offers "([^"]*)" only the controls? "([^"]*)"$`, s.ssoUIOnlyControls)
	sc.Step(`^"([^"]*)" (pauses|resumes) the rollout of "([^"]*)" in the web UI$`, s.ssoUIControl)
	sc.Step("^\"([^\"]*)\" runs `flotilla login --sso` and approves its code at the OpenID provider$", s.ssoCLILogin)
	sc.Step("^\"([^\"]*)\" runs `flotilla login --sso` and approves its code on the OpenID provider's device form$", s.ssoCLILoginForm)
	sc.Step("^`flotilla login --sso` says it logged in as \"([^\"]*)\", keeping a refresh token in a file only its owner reads$", s.ssoCLILoggedIn)
	sc.Step("^`flotilla approve --wave (\\d+)` is run for the rollout of \"([^\"]*)\" without a token, as the person logged in$", s.ssoApprove)
	sc.Step("^`flotilla get audit` lists the approval of wave (\\d+) by \"([^\"]*)\"$", s.ssoAuditLists)
	sc.Step(`^without credentials flotilla's API, its watch stream and its controls answer 401, saying "([^"]*)"$`, s.ssoHint401)
	sc.Step("^`flotilla get rollouts` without a token or a login fails, saying \"([^\"]*)\"$", s.ssoHintCLI)
	sc.Step(`^the web UI shows its login form offering "Log in with SSO", which leads to the OpenID provider's login form$`, s.ssoHintUI)
	sc.Step(`^web sessions are swept from the state every second$`, s.sweepEverySecond)
	sc.Step(`^the OpenID provider's ID tokens last (\d+) seconds$`, s.ssoTokenLifetime)
	sc.Step("^\"([^\"]*)\" runs `flotilla login --sso --browser` and logs in at the OpenID provider in Chromium$", s.ssoCLIBrowserLogin)
	sc.Step(`^a redirect to the login's callback with another state was refused while it waited$`, s.ssoForgedRefused)
	sc.Step(`^the ID token the CLI keeps has expired$`, s.ssoCLITokenExpired)
	sc.Step("^`flotilla whoami` without a token names \"([^\"]*)\", username \"([^\"]*)\", in group \"([^\"]*)\", the CLI having refreshed its login at the OpenID provider$", s.ssoCLIWhoami)
	sc.Step(`^the web UI's page is left for a blank one, its session cookie kept$`, s.ssoBlankPage)
	sc.Step(`^the web UI's session names "([^"]*)" in group "([^"]*)", with (no|the) approve permission in project "([^"]*)"$`, s.ssoSessionNames)
	sc.Step(`^the OpenID provider moves "([^"]*)" to group "([^"]*)"$`, s.ssoMoveGroup)
	sc.Step(`^the ID token of the web UI's session has expired$`, s.ssoTokenExpired)
	sc.Step(`^the OpenID provider has refreshed the login of "([^"]*)" at least (\d+) times?$`, s.ssoRefreshedTimes)
	sc.Step(`^the OpenID provider revokes the logins of "([^"]*)"$`, s.ssoRevoke)
	sc.Step(`^the web UI's session is refused 401 saying "([^"]*)"$`, s.ssoSessionRefused)
	sc.Step(`^the web UI's session is refused 401 again, saying "([^"]*)"$`, s.ssoSessionRefused)
	sc.Step(`^the web UI, opened again, shows its login form$`, s.ssoLoginFormAgain)
	sc.Step(`^the state holds a live single sign-on session of "([^"]*)" (\d+) seconds later$`, s.liveSSOSession)
	sc.Step(`^within (\d+) seconds the state holds no single sign-on session of "([^"]*)"$`, s.noSSOSession)
	sc.Step(`^the OpenID provider refuses the scope "([^"]*)"$`, s.ssoRefuseScope)
	sc.Step(`^single sign-on asks no offline_access \(server\.sso\.offlineAccess: false\)$`, s.ssoNoOfflineAccess)
	sc.Step(`^the OpenID provider holds no refresh token of "([^"]*)"$`, s.ssoNoRefreshToken)
	sc.Step(`^the OpenID provider answered no refresh of "([^"]*)"$`, s.ssoNoRefresh)
	sc.Step("^`flotilla login --sso` says it logged in as \"([^\"]*)\", warning that the provider gave no refresh token, and keeps none$", s.ssoCLILoggedInNoRefresh)
}

var ssoWorlds sync.Map // *world -> *ssoWorld

func (s *scenario) sso() *ssoWorld {
	v, _ := ssoWorlds.LoadOrStore(s.w, &ssoWorld{})
	return v.(*ssoWorld)
}

func (s *scenario) ssoProvider(alice, aliceGroup, bob, bobGroup string) error {
	if s.w == nil {
		return errors.New("no scenario world: a registry step must come first")
	}
	sw := s.sso()
	sw.users = []oidcop.User{ssoUser(alice, aliceGroup), ssoUser(bob, bobGroup)}
	s.onCleanup(func() { ssoWorlds.Delete(s.w) })
	// The provider starts when flotilla's config is written: its web
	// client's redirect URL is flotilla's address.
	s.w.configEdits = append(s.w.configEdits, s.ssoConfig)
	return nil
}

// ssoConfig starts the provider and adds server.sso and the projects to
// flotilla's config.
func (s *scenario) ssoConfig(cfg map[string]any) error {
	sw := s.sso()
	server := cfg["server"].(map[string]any)
	external := "http://" + server["listen"].(string)
	clientSecret := "web-" + randomHex(16)
	var opts []oidcop.Option
	if sw.lifetime > 0 {
		opts = append(opts, oidcop.TokenLifetime(sw.lifetime))
	}
	if len(sw.refused) > 0 {
		opts = append(opts, oidcop.RefuseScopes(sw.refused...))
	}
	p, err := oidcop.Start(sw.users, []oidcop.Client{
		{ID: "flotilla", Secret: clientSecret, RedirectURIs: []string{external + "/auth/callback"}},
		// The CLI: the device flow, or `login --sso --browser`'s loopback
		// redirect on any port (RFC 8252).
		{ID: "flotilla-cli", RedirectURIs: []string{"http://127.0.0.1/auth/callback"}},
	}, opts...)
	if err != nil {
		return err
	}
	s.onCleanup(func() { _ = p.Close() })
	sw.provider = p
	secretFile := filepath.Join(s.w.dir, "sso-client.secret")
	if err := os.WriteFile(secretFile, []byte(clientSecret+"\n"), 0o600); err != nil {
		return err
	}
	server["externalURL"] = external
	sso := map[string]any{"issuer": p.Issuer, "clientID": "flotilla", "clientSecret": map[string]any{"file": secretFile},
		"cliClientID": "flotilla-cli"}
	if sw.noOffline {
		sso["offlineAccess"] = false
	}
	server["sso"] = sso
	if len(sw.projects) > 0 {
		// The steps' own token (the automation's "default") stays admin
		// everywhere: the other steps push, read and watch with it.
		admin := map[string]any{"name": "admin", "subjects": []string{"token:default"}}
		projects := slices.Clone(sw.projects)
		for _, p := range projects {
			p["roles"] = append(p["roles"].([]map[string]any), admin)
		}
		cfg["projects"] = append(projects, map[string]any{"name": "default", "roles": []map[string]any{admin}})
	}
	return nil
}

func (s *scenario) ssoProject(app, project, viewers, approvers string) error {
	sw := s.sso()
	sw.projects = append(sw.projects, map[string]any{"name": project, "applications": []string{app}, "roles": []map[string]any{
		{"name": "viewer", "subjects": []string{"group:" + viewers}},
		{"name": "approver", "subjects": []string{"group:" + approvers}},
	}})
	return nil
}

func (s *scenario) ssoWaveNeedsOne(wave int) error {
	s.wavePolicy(wave, "approvals", 1)
	return nil
}

// providerLogin fills the provider's form the browser shows (the login
// of the code flow, or the device page) as who.
func (s *scenario) providerLogin(ctx context.Context, b *browser, who string) error {
	if err := b.until(ctx, uiWait, "the provider's login form", `document.querySelector('#username') && document.querySelector('#password')`); err != nil {
		return err
	}
	return b.run(ctx, uiWait,
		chromedp.SendKeys(`#username`, strings.Split(who, "@")[0], chromedp.ByQuery),
		chromedp.SendKeys(`#password`, ssoPassword, chromedp.ByQuery),
		chromedp.Click(`#submit`, chromedp.ByQuery))
}

func (s *scenario) ssoUILogin(ctx context.Context, who string) error {
	b, err := s.startBrowser(ctx)
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/")); err != nil {
		return err
	}
	if err := b.click(ctx, "#login-sso"); err != nil {
		return err
	}
	if err := s.providerLogin(ctx, b, who); err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the page is live after the login", `document.body.dataset.live === "true"`); err != nil {
		return err
	}
	// From here the page must not be loaded again (notReloaded), as openUI's.
	return b.run(ctx, uiWait, chromedp.Evaluate(recorder, nil))
}

// sessionCookie is the browser's flotilla_sso cookie, as Chromium keeps it.
func (b *browser) sessionCookie(ctx context.Context) (*network.Cookie, error) {
	var cookies []*network.Cookie
	err := b.run(ctx, uiWait, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{b.base + "/ui/"}).Do(ctx)
		return err
	}))
	if err != nil {
		return nil, err
	}
	for _, c := range cookies {
		if c.Name == "flotilla_sso" {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the browser holds no flotilla_sso cookie (it holds %d cookies)", len(cookies))
}

func (s *scenario) ssoUINames(ctx context.Context, who string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the header names "+who, whoami(who)+` && document.querySelector('#logout')`); err != nil {
		return err
	}
	c, err := b.sessionCookie(ctx)
	if err != nil {
		return err
	}
	if !c.HTTPOnly || c.SameSite != network.CookieSameSiteLax || c.Path != "/" {
		return fmt.Errorf("the session cookie is %+v, want HttpOnly, SameSite=Lax, path /", c)
	}
	return nil
}

// sessionHeader is the header that sends the browser's session.
func (s *scenario) ssoSessionHeader(ctx context.Context) (http.Header, error) {
	b, err := s.uiBrowser()
	if err != nil {
		return nil, err
	}
	c, err := b.sessionCookie(ctx)
	if err != nil {
		return nil, err
	}
	return http.Header{"Cookie": {c.Name + "=" + c.Value}}, nil
}

func (s *scenario) ssoUIReadsOnly(ctx context.Context, mine, other string) error {
	h, err := s.ssoSessionHeader(ctx)
	if err != nil {
		return err
	}
	names := func(header http.Header) ([]string, error) {
		a, err := s.call(ctx, http.MethodGet, "/api/v1/applications", header, nil)
		if err != nil {
			return nil, err
		}
		if a.status != http.StatusOK {
			return nil, fmt.Errorf("GET /api/v1/applications: %d %s", a.status, a.body)
		}
		var apps []struct{ Name string }
		if err := json.Unmarshal([]byte(a.body), &apps); err != nil {
			return nil, err
		}
		var out []string
		for _, a := range apps {
			out = append(out, a.Name)
		}
		return out, nil
	}
	person, err := names(h)
	if err != nil {
		return err
	}
	all, err := names(bearer(s.w.apiToken))
	if err != nil {
		return err
	}
	if !slices.Contains(all, other) || !slices.Contains(all, mine) {
		return fmt.Errorf("the automation's token reads %v, want %s and %s", all, mine, other)
	}
	if !slices.Equal(person, []string{mine}) {
		return fmt.Errorf("the web UI's session reads the applications %v, want only %s", person, mine)
	}
	return nil
}

func (s *scenario) ssoUINoControl(ctx context.Context, version, who, project string) error {
	b, id, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	hint := fmt.Sprintf("%s's roles grant no control of this rollout in project %s.", who, project)
	return b.until(ctx, uiWait, "the rollout "+id+" with no control and the hint "+hint,
		fmt.Sprintf(`document.querySelector('section[data-rollout=%q]') && document.querySelector('#controls-hint') && document.querySelector('#controls-hint').textContent === %q && !document.querySelector('#controls button')`, id, hint))
}

// ssoControlRefused sends a control (abort or rollback) of the rollout of
// version with the web UI's session, as the page would: the API must
// refuse it, naming the permission the person's roles lack.
func (s *scenario) ssoControlRefused(ctx context.Context, _, version, perm string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	h, err := s.ssoSessionHeader(ctx)
	if err != nil {
		return err
	}
	h.Set("X-Flotilla-CSRF", "1")
	h.Set("Content-Type", "application/json")
	a, err := s.call(ctx, http.MethodPost, "/api/v1/rollouts/"+id+"/"+perm, h, []byte(`{"reason":"features"}`))
	if err != nil {
		return err
	}
	if a.status != http.StatusForbidden || !strings.Contains(a.body, " may not "+perm+" in project ") {
		return fmt.Errorf("POST %s with the session answered %d %s, want 403 saying who may not %s in which project", perm, a.status, a.body, perm)
	}
	return nil
}

// ssoAlsoUser adds a person to the provider, before flotilla's config
// starts it.
func (s *scenario) ssoAlsoUser(who, group string) error {
	sw := s.sso()
	if len(sw.users) == 0 {
		return errors.New("no OpenID provider: its step must come first")
	}
	sw.users = append(sw.users, ssoUser(who, group))
	return nil
}

// ssoUser is the provider's person of the email who, in group: their
// login name (preferred_username) the email's local part, their subject
// opaque, as Keycloak's, Okta's and Google's are.
func ssoUser(who, group string) oidcop.User {
	h := randomHex(16)
	return oidcop.User{Name: strings.Split(who, "@")[0], Subject: h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:],
		Password: ssoPassword, Email: who, Groups: []string{group}}
}

// ssoCustomRole defines a role that is not built in, in project, with
// the permissions listed (comma-separated), granted to group.
func (s *scenario) ssoCustomRole(project, group, role, perms string) error {
	for _, p := range s.sso().projects {
		if p["name"] == project {
			p["roles"] = append(p["roles"].([]map[string]any), map[string]any{
				"name": role, "permissions": strings.Split(perms, ","), "subjects": []string{"group:" + group}})
			return nil
		}
	}
	return fmt.Errorf("no step put an application in project %s", project)
}

// ssoUIOnlyControls opens the rollout of version in the web UI, whose
// header names who: its controls are exactly the buttons labelled (the
// rollout's controls and its waves' approvals alike), and no hint that
// none is granted.
func (s *scenario) ssoUIOnlyControls(ctx context.Context, version, who, labels string) error {
	b, id, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	want := strings.Split(labels, ",")
	for i := range want {
		want[i] = strings.TrimSpace(want[i])
	}
	return b.until(ctx, uiWait, fmt.Sprintf("the rollout %s offering %s only the controls %v", id, who, want), fmt.Sprintf(
		`%s && document.querySelector('section[data-rollout=%q]') && !document.querySelector('#controls-hint') &&
		JSON.stringify([...document.querySelectorAll('section[data-rollout] button')].map((b) => b.textContent.trim())) === %q`,
		whoami(who), id, jsArray(want)))
}

// ssoUIControl presses the rollout's Pause or Resume button in the web
// UI, which the page shows open, and waits for its notice that the
// control was recorded as who's. A resume releases the hold.
func (s *scenario) ssoUIControl(ctx context.Context, who, action, version string) error {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return err
	}
	control, label := "pause", "Pause"
	if action == "resumes" {
		control, label = "resume", "Resume"
		s.released(time.Now())
	}
	if err := b.until(ctx, uiWait, "the rollout "+id+" open", fmt.Sprintf(`document.querySelector('section[data-rollout=%q]')`, id)); err != nil {
		return err
	}
	if err := b.click(ctx, "#control-"+control); err != nil {
		return err
	}
	notice := label + ": recorded as " + who + "."
	return b.until(ctx, uiWait, "the notice "+notice, fmt.Sprintf(`document.querySelector('#notice').textContent === %q`, notice))
}

// ssoCLIEnv is the environment of a person's CLI: no FLOTILLA_TOKEN, the
// scenario's CLI config file.
func (s *scenario) ssoCLIEnv() []string {
	sw := s.sso()
	if sw.cliConfig == "" {
		sw.cliConfig = filepath.Join(s.w.dir, "cli", "config.yaml")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLOTILLA_TOKEN=") {
			env = append(env, kv)
		}
	}
	return append(env, "FLOTILLA_CLI_CONFIG="+sw.cliConfig)
}

func (s *scenario) ssoCLILogin(ctx context.Context, who string) error {
	return s.ssoDeviceLogin(ctx, who, s.approveInChromium)
}

// ssoCLILoginForm is ssoCLILogin with the provider's device form posted
// over HTTP, as its page would: for a scenario whose Chromium holds
// another person's web session.
func (s *scenario) ssoCLILoginForm(ctx context.Context, who string) error {
	return s.ssoDeviceLogin(ctx, who, s.approveByForm)
}

// approveInChromium opens the device flow's verification URL in Chromium,
// logs in as who and approves.
func (s *scenario) approveInChromium(ctx context.Context, who, complete string) error {
	b, err := s.startBrowser(ctx)
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(complete)); err != nil {
		return err
	}
	if err := s.providerLogin(ctx, b, who); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the provider approved the device", `document.querySelector('#approved')`)
}

// approveByForm posts the provider's device form (its code, who's name
// and password) and wants its page saying the device is approved.
func (s *scenario) approveByForm(ctx context.Context, who, complete string) error {
	u, err := url.Parse(complete)
	if err != nil {
		return err
	}
	form := url.Values{"user_code": {u.Query().Get("user_code")}, "username": {strings.Split(who, "@")[0]}, "password": {ssoPassword}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sso().provider.Issuer+"/device", strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="approved"`) {
		return fmt.Errorf("the provider's device form answered %d %s", res.StatusCode, body)
	}
	return nil
}

// ssoDeviceLogin runs `flotilla login --sso` and has approve approve its
// code at the provider as who.
func (s *scenario) ssoDeviceLogin(ctx context.Context, who string, approve func(ctx context.Context, who, complete string) error) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, flotillaBin, "login", "--sso", "--server", s.w.flotilla.url())
	cmd.Env = s.ssoCLIEnv()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var printed strings.Builder
	complete := ""
	rd := bufio.NewReader(out)
	for complete == "" {
		line, err := rd.ReadString('\n')
		printed.WriteString(line)
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "(or open "); ok {
			complete = strings.TrimSuffix(u, ")")
		}
		if err != nil {
			_ = cmd.Wait()
			return fmt.Errorf("flotilla login --sso printed no verification URL: %q, stderr %q", printed.String(), errOut.String())
		}
	}
	// The person opens the URL, logs in and approves.
	if err := approve(ctx, who, complete); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	rest, _ := io.ReadAll(rd)
	printed.Write(rest)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("flotilla login --sso: %w: stdout %q, stderr %q", err, printed.String(), errOut.String())
	}
	s.sso().login = printed.String()
	return nil
}

func (s *scenario) ssoCLILoggedIn(who string) error {
	sw := s.sso()
	want := fmt.Sprintf("Logged in to %s as %s", s.w.flotilla.url(), who)
	if !strings.Contains(sw.login, want) {
		return fmt.Errorf("flotilla login --sso printed %q, want %q", sw.login, want)
	}
	fi, err := os.Stat(sw.cliConfig)
	if err != nil {
		return err
	}
	if fi.Mode().Perm() != 0o600 {
		return fmt.Errorf("%s has mode %v, want 0600", sw.cliConfig, fi.Mode().Perm())
	}
	raw, err := os.ReadFile(sw.cliConfig)
	if err != nil {
		return err
	}
	if !strings.Contains(string(raw), "refreshToken: ") || strings.Contains(string(raw), `refreshToken: ""`) {
		return fmt.Errorf("%s keeps no refresh token:\n%s", sw.cliConfig, raw)
	}
	return nil
}

func (s *scenario) ssoApprove(ctx context.Context, wave int, version string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	s.released(time.Now())
	cmd := exec.CommandContext(ctx, flotillaBin, "approve", id, "--wave", fmt.Sprint(wave), "--reason", "features", "--server", s.w.flotilla.url())
	cmd.Env = s.ssoCLIEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flotilla approve: %w: %s%s", err, out.String(), errOut.String())
	}
	return nil
}

func (s *scenario) ssoAuditLists(ctx context.Context, wave int, who string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := s.flotillaCLI(ctx, "get", "audit")
		if err != nil {
			return err
		}
		// A row of the table: the person's name, the approval, its wave.
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if slices.Contains(f, who) && slices.ContainsFunc(f, func(x string) bool { return strings.HasPrefix(x, "approv") }) && slices.Contains(f, fmt.Sprint(wave)) {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flotilla get audit lists no approval of wave %d by %s:\n%s", wave, who, out)
		}
		time.Sleep(time.Second)
	}
}

// ssoHint401 asks the API's reads, its watch stream and a control without
// credentials: each answers 401, its JSON error ending with how a person
// logs in through the provider.
func (s *scenario) ssoHint401(ctx context.Context, hint string) error {
	type ask struct{ method, path string }
	asks := []ask{{http.MethodPost, "/api/v1/fleet/stop"}}
	for _, p := range readPaths {
		if !isUI(p) {
			asks = append(asks, ask{http.MethodGet, p})
		}
	}
	var problems []string
	for _, q := range asks {
		var body []byte
		h := http.Header{}
		if q.method == http.MethodPost {
			body = []byte(`{"reason":"features"}`)
			h.Set("Content-Type", "application/json")
		}
		a, err := s.callBusy(ctx, q.method, q.path, h, body)
		if err != nil {
			return err
		}
		var e struct{ Error string }
		if a.status != http.StatusUnauthorized || json.Unmarshal([]byte(a.body), &e) != nil || !strings.HasSuffix(e.Error, hint) {
			problems = append(problems, fmt.Sprintf("%s %s answered %d %.300s, want 401 with an error ending %q", q.method, q.path, a.status, a.body, hint))
		}
	}
	if problems != nil {
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

// ssoHintCLI runs `flotilla get rollouts` as a person who has neither a
// token nor a login (no FLOTILLA_TOKEN, an empty CLI config).
func (s *scenario) ssoHintCLI(ctx context.Context, hint string) error {
	cmd := exec.CommandContext(ctx, flotillaBin, "get", "rollouts", "--server", s.w.flotilla.url())
	cmd.Env = s.ssoCLIEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(errOut.String(), hint) {
		return fmt.Errorf("flotilla get rollouts without a token or a login: %v, stdout %q, stderr %q; want exit 1 saying %q", err, out.String(), errOut.String(), hint)
	}
	return nil
}

// ssoHintUI reads the page the browser shows for /ui/ without a session:
// the login form, and the SSO button, which leads to the provider.
func (s *scenario) ssoHintUI(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the login form offering Log in with SSO", loginForm+
		` && document.querySelector('#login-sso') && document.querySelector('#login-sso').textContent === "Log in with SSO" && !document.querySelector('#rollouts')`); err != nil {
		return err
	}
	if err := b.click(ctx, "#login-sso"); err != nil {
		return err
	}
	issuer := s.sso().provider.Issuer
	return b.until(ctx, uiWait, "the provider's login form at "+issuer,
		fmt.Sprintf(`location.href.startsWith(%q) && document.querySelector('#username') && document.querySelector('#password')`, issuer))
}

func (s *scenario) sweepEverySecond() error {
	s.w.configEdits = append(s.w.configEdits, func(cfg map[string]any) error {
		cfg["server"].(map[string]any)["sessionSweepInterval"] = "1s"
		return nil
	})
	return nil
}

// stateSession is a web session as the state keeps it: a person's (Name)
// or a created token's (Token).
type stateSession struct {
	Name, Token string
	ExpiresAt   time.Time
	EndedAt     *time.Time
}

// stateSessions reads the web sessions of collection from the state
// itself, the NATS KV bucket of documents every replica shares
// (pkg/state/natskv's Docs: keys "<collection>.<key>", each base64url).
func (s *scenario) stateSessions(ctx context.Context, collection string) ([]stateSession, error) {
	if !s.scaleOut {
		return nil, errors.New("the state's sessions are read from the NATS KV: tag the scenario @scale-out")
	}
	return readNATS(ctx, func(ctx context.Context) ([]stateSession, error) { return s.readStateSessions(ctx, collection) })
}

// readStateSessions is one read of stateSessions.
func (s *scenario) readStateSessions(ctx context.Context, collection string) ([]stateSession, error) {
	kv, done, err := s.bucket(ctx, "docs")
	if err != nil {
		return nil, err
	}
	defer done()
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := base64.RawURLEncoding.EncodeToString([]byte(collection)) + "."
	var out []stateSession
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		var doc stateSession
		if err := json.Unmarshal(e.Value(), &doc); err != nil {
			return nil, fmt.Errorf("the session %s: %w", k, err)
		}
		out = append(out, doc)
	}
	return out, nil
}

// sessionsOf are the sessions of collection that are who's.
func (s *scenario) sessionsOf(ctx context.Context, collection, who string) ([]stateSession, error) {
	all, err := s.stateSessions(ctx, collection)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(d stateSession) bool { return d.Name != who && d.Token != who }), nil
}

// liveSession waits the given seconds (several sweeps) and wants who's
// session still in the state, live: a sweep must keep live sessions.
func (s *scenario) liveSession(ctx context.Context, collection, who string, seconds int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(seconds) * time.Second):
	}
	docs, err := s.sessionsOf(ctx, collection, who)
	if err != nil {
		return err
	}
	live := slices.ContainsFunc(docs, func(d stateSession) bool { return d.EndedAt == nil && time.Now().Before(d.ExpiresAt) })
	if !live {
		return fmt.Errorf("the state's %s hold no live session of %s: %+v", collection, who, docs)
	}
	return nil
}

// noSession wants the state to hold no session of who within the given
// seconds: the sweep deletes the ended ones. A read NATS does not answer
// (another scenario killed a node) is tried again (readNATS): no sweep
// could delete anything meanwhile either.
func (s *scenario) noSession(ctx context.Context, collection, who string, seconds int) error {
	deadline := time.Now().Add(time.Duration(seconds) * time.Second)
	for {
		docs, err := s.sessionsOf(ctx, collection, who)
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the state's %s still hold %d sessions of %s %ds later: %+v", collection, len(docs), who, seconds, docs)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *scenario) liveSSOSession(ctx context.Context, who string, seconds int) error {
	return s.liveSession(ctx, api.SSOSessionCollection, who, seconds)
}

func (s *scenario) noSSOSession(ctx context.Context, seconds int, who string) error {
	return s.noSession(ctx, api.SSOSessionCollection, who, seconds)
}

func (s *scenario) ssoTokenLifetime(seconds int) error {
	s.sso().lifetime = time.Duration(seconds) * time.Second
	return nil
}

// ssoCLIBrowserLogin runs `flotilla login --sso --browser --sso-port 0`:
// once it waits, a redirect to its callback with another state (as a page
// of another site could send) must be refused, then Chromium opens the
// authorization URL it printed and logs in at the provider, which sends
// the browser back to the CLI's callback.
func (s *scenario) ssoCLIBrowserLogin(ctx context.Context, who string) error {
	sw := s.sso()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, flotillaBin, "login", "--sso", "--browser", "--sso-port", "0", "--server", s.w.flotilla.url())
	cmd.Env = s.ssoCLIEnv()
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var printed strings.Builder
	authURL, redirect := "", ""
	rd := bufio.NewReader(out)
	for redirect == "" {
		line, err := rd.ReadString('\n')
		printed.WriteString(line)
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, sw.provider.Issuer) {
			authURL = line
		}
		if r, ok := strings.CutPrefix(line, "Waiting for the provider to redirect to "); ok {
			redirect = strings.TrimSuffix(r, "...")
		}
		if err != nil {
			_ = cmd.Wait()
			return fmt.Errorf("flotilla login --sso --browser printed no URL and callback: %q, stderr %q", printed.String(), errOut.String())
		}
	}
	if authURL == "" || !strings.Contains(authURL, "code_challenge=") || !strings.Contains(authURL, "state=") {
		return fmt.Errorf("flotilla login --sso --browser printed no authorization URL with PKCE and a state: %q", printed.String())
	}
	forged, err := http.Get(redirect + "?code=forged&state=not-this-login")
	if err != nil {
		return fmt.Errorf("a redirect to %s: %w", redirect, err)
	}
	_ = forged.Body.Close()
	sw.forged = forged.StatusCode
	b, err := s.startBrowser(ctx)
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(authURL)); err != nil {
		return err
	}
	if err := s.providerLogin(ctx, b, who); err != nil {
		return err
	}
	// The CLI's own page at its callback.
	if err := b.until(ctx, uiWait, "the CLI's callback page saying Logged in", fmt.Sprintf(
		`location.href.startsWith(%q) && document.querySelector('#result') && document.querySelector('#result').textContent.startsWith("Logged in")`, redirect)); err != nil {
		return err
	}
	rest, _ := io.ReadAll(rd)
	printed.Write(rest)
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("flotilla login --sso --browser: %w: stdout %q, stderr %q", err, printed.String(), errOut.String())
	}
	sw.login = printed.String()
	return nil
}

func (s *scenario) ssoForgedRefused() error {
	if got := s.sso().forged; got != http.StatusBadRequest {
		return fmt.Errorf("a redirect with another state answered %d, want 400 (and the login going on)", got)
	}
	return nil
}

// cliLogin is the login the CLI's config file keeps for the scenario's
// flotilla, as the file says it.
func (s *scenario) cliLogin() (map[string]any, error) {
	raw, err := os.ReadFile(s.sso().cliConfig)
	if err != nil {
		return nil, err
	}
	var c struct {
		Logins []map[string]any `json:"logins"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("reading the CLI's config: %w", err)
	}
	for _, l := range c.Logins {
		if l["server"] == s.w.flotilla.url() {
			return l, nil
		}
	}
	return nil, fmt.Errorf("the CLI's config keeps no login to %s:\n%s", s.w.flotilla.url(), raw)
}

// ssoCLITokenExpired waits past the expiry of the ID token the CLI keeps,
// and remembers the login and the provider's count of refreshes then.
func (s *scenario) ssoCLITokenExpired(ctx context.Context) error {
	sw := s.sso()
	l, err := s.cliLogin()
	if err != nil {
		return err
	}
	exp, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["expiry"]))
	if err != nil {
		return fmt.Errorf("the login's expiry %v: %w", l["expiry"], err)
	}
	if wait := time.Until(exp) + time.Second; wait > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	sw.before = l
	sw.refreshes = sw.provider.Refreshes(strings.Split(fmt.Sprint(l["name"]), "@")[0])
	return nil
}

// ssoCLIWhoami runs `flotilla whoami -o json` as the person: flotilla
// names them and the provider's groups, the provider counts one more
// refresh, and the file keeps a new ID token and the rotated refresh token.
func (s *scenario) ssoCLIWhoami(ctx context.Context, who, username, group string) error {
	sw := s.sso()
	cmd := exec.CommandContext(ctx, flotillaBin, "whoami", "-o", "json", "--server", s.w.flotilla.url())
	cmd.Env = s.ssoCLIEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("flotilla whoami: %w: %s%s", err, out.String(), errOut.String())
	}
	var w struct {
		Name     string
		Username string
		Via      string
		Groups   []string
	}
	if err := json.Unmarshal(out.Bytes(), &w); err != nil {
		return fmt.Errorf("flotilla whoami -o json printed %q: %w", out.String(), err)
	}
	if w.Name != who || w.Username != username || !slices.Equal(w.Groups, []string{group}) || w.Via != "token" {
		return fmt.Errorf("flotilla whoami says %+v, want %s (username %s) in group %s, via its ID token", w, who, username, group)
	}
	if n := sw.provider.Refreshes(strings.Split(who, "@")[0]); n <= sw.refreshes {
		return fmt.Errorf("the provider answered %d refreshes of %s, as many as before whoami: the CLI did not refresh its login", n, who)
	}
	after, err := s.cliLogin()
	if err != nil {
		return err
	}
	for _, k := range []string{"idToken", "refreshToken"} {
		if after[k] == sw.before[k] || after[k] == "" {
			return fmt.Errorf("the CLI's config keeps the same %s after the refresh", k)
		}
	}
	return nil
}

// ssoBlankPage leaves the web UI's page: only the steps' own calls use
// the session from here, so what refreshes it is theirs.
func (s *scenario) ssoBlankPage(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	return b.run(ctx, uiWait, chromedp.Navigate("about:blank"))
}

// ssoSessionWhoami is GET /api/v1/whoami with the browser's session cookie.
func (s *scenario) ssoSessionWhoami(ctx context.Context) (answer, error) {
	h, err := s.ssoSessionHeader(ctx)
	if err != nil {
		return answer{}, err
	}
	return s.call(ctx, http.MethodGet, "/api/v1/whoami", h, nil)
}

func (s *scenario) ssoSessionNames(ctx context.Context, who, group, has, project string) error {
	a, err := s.ssoSessionWhoami(ctx)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return fmt.Errorf("GET /api/v1/whoami with the session: %d %s", a.status, a.body)
	}
	var w api.Whoami
	if err := json.Unmarshal([]byte(a.body), &w); err != nil {
		return err
	}
	approves := slices.Contains(w.Permissions[project], identity.Approve)
	if w.Name != who || !slices.Equal(w.Groups, []string{group}) || approves != (has == "the") {
		return fmt.Errorf("the session is %s in groups %v with the permissions %v in project %s; want %s in group %s, with %s approve permission",
			w.Name, w.Groups, w.Permissions[project], project, who, group, has)
	}
	return nil
}

func (s *scenario) ssoMoveGroup(who, group string) error {
	s.sso().provider.SetGroups(strings.Split(who, "@")[0], []string{group})
	return nil
}

// ssoTokenExpired waits a whole ID token lifetime and a second: whatever
// ID token the session holds has expired.
func (s *scenario) ssoTokenExpired(ctx context.Context) error {
	sw := s.sso()
	if sw.lifetime == 0 {
		return errors.New("the provider's ID tokens last their default ten minutes: a step must shorten them")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(sw.lifetime + time.Second):
		return nil
	}
}

func (s *scenario) ssoRefreshedTimes(user string, n int) error {
	if got := s.sso().provider.Refreshes(user); got < n {
		return fmt.Errorf("the provider answered %d refreshes of %s, want at least %d", got, user, n)
	}
	return nil
}

func (s *scenario) ssoRevoke(user string) error {
	if n := s.sso().provider.RevokeLogins(user); n == 0 {
		return fmt.Errorf("%s holds no refresh token at the provider: the web login asked for none", user)
	}
	return nil
}

func (s *scenario) ssoSessionRefused(ctx context.Context, msg string) error {
	a, err := s.ssoSessionWhoami(ctx)
	if err != nil {
		return err
	}
	var e struct{ Error string }
	if a.status != http.StatusUnauthorized || json.Unmarshal([]byte(a.body), &e) != nil || !strings.HasSuffix(e.Error, msg) {
		return fmt.Errorf("GET /api/v1/whoami with the session answered %d %s, want 401 saying %q", a.status, a.body, msg)
	}
	return nil
}

func (s *scenario) ssoLoginFormAgain(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/")); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the login form", loginForm+` && !document.querySelector('#rollouts')`)
}

func (s *scenario) ssoRefuseScope(scope string) error {
	sw := s.sso()
	sw.refused = append(sw.refused, scope)
	return nil
}

func (s *scenario) ssoNoOfflineAccess() error {
	s.sso().noOffline = true
	return nil
}

// ssoNoRefreshToken reads the provider: it issued user no refresh token
// (no login asked offline_access).
func (s *scenario) ssoNoRefreshToken(user string) error {
	if n := s.sso().provider.RefreshTokens(user); n != 0 {
		return fmt.Errorf("the provider holds %d refresh tokens of %s, want none", n, user)
	}
	return nil
}

func (s *scenario) ssoNoRefresh(user string) error {
	if n := s.sso().provider.Refreshes(user); n != 0 {
		return fmt.Errorf("the provider answered %d refreshes of %s, want none", n, user)
	}
	return nil
}

// ssoCLILoggedInNoRefresh reads what `flotilla login --sso` printed and
// the login it kept: the person's, without a refresh token.
func (s *scenario) ssoCLILoggedInNoRefresh(who string) error {
	sw := s.sso()
	for _, want := range []string{
		"warning: the provider gave no refresh token: log in again when the ID token expires",
		fmt.Sprintf("Logged in to %s as %s", s.w.flotilla.url(), who),
	} {
		if !strings.Contains(sw.login, want) {
			return fmt.Errorf("flotilla login --sso printed %q, want %q", sw.login, want)
		}
	}
	l, err := s.cliLogin()
	if err != nil {
		return err
	}
	idToken, _ := l["idToken"].(string)
	refresh, _ := l["refreshToken"].(string)
	if l["name"] != who || idToken == "" || refresh != "" {
		return fmt.Errorf("the CLI keeps the login %v, want %s's ID token and no refresh token", l, who)
	}
	return nil
}
