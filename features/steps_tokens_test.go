package features

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/pkg/api"
)

// Runtime API tokens (#31 item 4): the admin makes and revokes them with
// the real CLI; the steps use them as a client does, on every replica of
// scale-out mode (each reads the tokens through its own watched cache).

func (s *scenario) registerTokenSteps(sc *godog.ScenarioContext) {
	sc.Step("^the admin runs `flotilla token create (\\S+) --project (\\S+) --role (\\S+) --expires (\\S+)`$", s.tokenCreate)
	sc.Step("^it printed the secret of \"([^\"]*)\" once, and `flotilla token list` lists \"([^\"]*)\" as \"([^\"]*)\" created by \"([^\"]*)\" expiring in (\\d+) days, without its secret$", s.tokenListed)
	sc.Step(`^on every replica the token "([^"]*)" reads the rollouts and is named "([^"]*)" by whoami$`, s.tokenReads)
	sc.Step(`^on every replica the token "([^"]*)" stopping the fleet is refused with 403 "([^"]*)"$`, s.tokenStopRefused)
	sc.Step(`^on every replica the token "([^"]*)" quarantining a version of "([^"]*)" is refused with 403 "([^"]*)"$`, s.tokenQuarantineRefused)
	sc.Step(`^on every replica the token "([^"]*)" overriding the freeze window of the rollout of "([^"]*)" is refused with 403 "([^"]*)"$`, s.tokenOverrideRefused)
	sc.Step("^the admin runs `flotilla token create (\\S+) --project (\\S+) --role (\\S+) --automation`$", s.tokenCreateAutomation)
	sc.Step("^the admin runs `flotilla token revoke (\\S+)`$", s.tokenRevoke)
	sc.Step(`^on every replica the token "([^"]*)" is refused with 401 "([^"]*)" within 1 second$`, s.tokenRefused)
	sc.Step(`^"([^"]*)" logs in to the web UI with the token the admin created$`, s.uiLoginCreated)
	sc.Step(`^the web UI, opened again, shows its login form saying the session is no longer valid$`, s.uiSessionEnded)
	sc.Step(`^the state holds a live web session of the token "([^"]*)" (\d+) seconds later$`, s.liveTokenSession)
	sc.Step(`^within (\d+) seconds the state holds no web session of the token "([^"]*)"(?:, once it expired)?$`, s.noTokenSession)
}

// liveTokenSession reads the created tokens' web sessions from the state
// the replicas share (steps_sso_test.go's liveSession).
func (s *scenario) liveTokenSession(ctx context.Context, token string, seconds int) error {
	return s.liveSession(ctx, api.TokenSessionCollection, token, seconds)
}

func (s *scenario) noTokenSession(ctx context.Context, seconds int, token string) error {
	return s.noSession(ctx, api.TokenSessionCollection, token, seconds)
}

// uiLoginCreated logs in to the web UI in a browser with the created
// token name (a stored session: sessions.go of pkg/api).
func (s *scenario) uiLoginCreated(ctx context.Context, name string) error {
	secret, ok := s.w.createdTokens[name]
	if !ok {
		return fmt.Errorf("no token %q was created", name)
	}
	b := s.w.browser
	if b == nil {
		var err error
		if b, err = s.startBrowser(ctx); err != nil {
			return err
		}
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/login")); err != nil {
		return err
	}
	if err := b.login(ctx, secret); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the page is live", `document.body.dataset.live === "true"`)
}

// uiSessionEnded reloads the rollouts page: the browser still holds the
// session's cookie, which must now be refused, the login form saying why.
func (s *scenario) uiSessionEnded(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/")); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "the login form saying the session ended",
		loginForm+` && !document.querySelector('#rollouts') && (document.querySelector('#login-error') || {}).textContent === "Your session has expired or is no longer valid: log in again."`)
}

// replicaURLs are the addresses of each replica (scale-out), or of the
// one flotilla.
func (s *scenario) replicaURLs() []string {
	if len(s.w.flotilla.replicas) == 0 {
		return []string{s.w.flotilla.url()}
	}
	var out []string
	for _, r := range s.w.flotilla.replicas {
		out = append(out, r.url())
	}
	return out
}

var secretLine = regexp.MustCompile(`(?m)^secret \(shown only now\): (flt_[0-9a-f]{64})$`)

func (s *scenario) tokenCreate(ctx context.Context, name, project, role, expires string) error {
	return s.tokenCreateWith(ctx, name, project, role, "--expires", expires)
}

// tokenCreateAutomation creates a machine's token: the CLI must say so.
func (s *scenario) tokenCreateAutomation(ctx context.Context, name, project, role string) error {
	if err := s.tokenCreateWith(ctx, name, project, role, "--automation"); err != nil {
		return err
	}
	if !strings.Contains(s.w.lastOutput, "(automation: its approvals never count)") {
		return fmt.Errorf("flotilla token create --automation does not say the token is automation: %q", s.w.lastOutput)
	}
	return nil
}

func (s *scenario) tokenCreateWith(ctx context.Context, name, project, role string, flags ...string) error {
	args := append([]string{"token", "create", name, "--project", project, "--role", role, "--reason", "features"}, flags...)
	out, err := s.flotillaCLI(ctx, args...)
	if err != nil {
		return err
	}
	m := secretLine.FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "token "+name+" created by default: "+role+" in "+project) {
		return fmt.Errorf("flotilla token create printed %q", out)
	}
	if s.w.createdTokens == nil {
		s.w.createdTokens = map[string]string{}
	}
	s.w.createdTokens[name] = m[1]
	s.w.lastOutput = out
	return nil
}

func (s *scenario) tokenListed(ctx context.Context, name, _, grants, by string, days int) error {
	secret := s.w.createdTokens[name]
	if strings.Count(s.w.lastOutput, secret) != 1 {
		return fmt.Errorf("token create printed the secret %d times", strings.Count(s.w.lastOutput, secret))
	}
	out, err := s.flotillaCLI(ctx, "token", "list")
	if err != nil {
		return err
	}
	if strings.Contains(out, secret) || strings.Contains(out, secret[4:20]) {
		return fmt.Errorf("flotilla token list shows the secret:\n%s", out)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" ") {
			row = l
		}
	}
	if row == "" || !strings.Contains(row, grants) || !strings.Contains(row, " "+by+" ") {
		return fmt.Errorf("flotilla token list does not list %s as %q by %s:\n%s", name, grants, by, out)
	}
	js, err := s.flotillaCLI(ctx, "token", "list", "-o", "json")
	if err != nil {
		return err
	}
	var ts []struct {
		Name      string
		ExpiresAt *time.Time
		RevokedAt *time.Time
	}
	if err := json.Unmarshal([]byte(js), &ts); err != nil {
		return fmt.Errorf("token list -o json: %w:\n%s", err, js)
	}
	for _, t := range ts {
		if t.Name != name {
			continue
		}
		want := time.Now().Add(time.Duration(days) * 24 * time.Hour)
		if t.ExpiresAt == nil || t.ExpiresAt.Sub(want).Abs() > time.Minute || t.RevokedAt != nil {
			return fmt.Errorf("token %s expires at %v (revoked %v), want about %s, not revoked", name, t.ExpiresAt, t.RevokedAt, want)
		}
		return nil
	}
	return fmt.Errorf("token list -o json has no %s:\n%s", name, js)
}

// bearer sends a request with the created token name.
func (s *scenario) bearer(ctx context.Context, method, url, name string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(`{"reason":"features"}`))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.w.createdTokens[name])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func (s *scenario) tokenReads(ctx context.Context, name, whoami string) error {
	for _, base := range s.replicaURLs() {
		if status, body, err := s.bearer(ctx, "GET", base+"/api/v1/rollouts", name); err != nil || status != 200 {
			return fmt.Errorf("GET %s/api/v1/rollouts with %s: %d %s %v", base, name, status, body, err)
		}
		status, body, err := s.bearer(ctx, "GET", base+"/api/v1/whoami", name)
		if err != nil || status != 200 || !strings.Contains(body, `"name":"`+whoami+`"`) {
			return fmt.Errorf("GET %s/api/v1/whoami with %s: %d %s %v", base, name, status, body, err)
		}
	}
	return nil
}

func (s *scenario) tokenStopRefused(ctx context.Context, name, msg string) error {
	return s.tokenControlRefused(ctx, name, "/api/v1/fleet/stop", msg)
}

// tokenQuarantineRefused asks every replica to quarantine a version of app
// with the token: each must refuse it, naming the permission.
func (s *scenario) tokenQuarantineRefused(ctx context.Context, name, app, msg string) error {
	return s.tokenControlRefused(ctx, name, "/api/v1/applications/"+app+"/quarantine", msg)
}

// tokenOverrideRefused asks every replica to override the freeze window of
// the rollout of version with the token: each must refuse it.
func (s *scenario) tokenOverrideRefused(ctx context.Context, name, version, msg string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	return s.tokenControlRefused(ctx, name, "/api/v1/rollouts/"+id+"/override", msg)
}

func (s *scenario) tokenControlRefused(ctx context.Context, name, path, msg string) error {
	for _, base := range s.replicaURLs() {
		status, body, err := s.bearer(ctx, "POST", base+path, name)
		if err != nil || status != 403 || !strings.Contains(body, msg) {
			return fmt.Errorf("POST %s%s with %s: %d %s %v, want 403 %q", base, path, name, status, body, err, msg)
		}
	}
	return nil
}

func (s *scenario) tokenRevoke(ctx context.Context, name string) error {
	out, err := s.flotillaCLI(ctx, "token", "revoke", name, "--reason", "features")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "token "+name+" revoked by default") {
		return fmt.Errorf("flotilla token revoke printed %q", out)
	}
	s.w.revokedAt = time.Now()
	return nil
}

// tokenRefused asks every replica, from the moment the revocation was
// answered, until each refuses the token: all within the second.
func (s *scenario) tokenRefused(ctx context.Context, name, msg string) error {
	for _, base := range s.replicaURLs() {
		for {
			status, body, err := s.bearer(ctx, "GET", base+"/api/v1/rollouts", name)
			if err != nil {
				return err
			}
			if status == 401 && strings.Contains(body, msg) {
				break
			}
			if time.Since(s.w.revokedAt) > time.Second {
				return fmt.Errorf("%s still answers the revoked token %s %s after the revocation: %d %s", base, name, time.Since(s.w.revokedAt), status, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}
