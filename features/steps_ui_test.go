package features

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cucumber/godog"
)

func (s *scenario) registerUISteps(sc *godog.ScenarioContext) {
	sc.Step(`^the web UI is open in a browser$`, s.openUI)
	sc.Step(`^the web UI lists the rollout of "([^"]*)" without a reload$`, s.uiLists)
	sc.Step(`^the rollout of "([^"]*)" is opened in the web UI$`, s.uiOpenRollout)
	sc.Step(`^the web UI shows wave 1 of the rollout of "([^"]*)" rolling out while wave 2 waits, then every cluster "([^"]*)", without a reload$`, s.uiShowsWaves)
	sc.Step(`^the web UI's timeline of the rollout of "([^"]*)" has its start, a cluster\.succeeded for each cluster, then its end$`, s.uiTimeline)
	sc.Step(`^the web UI shows the rollout of "([^"]*)" "([^"]*)", its reason naming cluster "([^"]*)"$`, s.uiReason)
	sc.Step(`^the web UI shows the rollout of "([^"]*)" without controls, offering to log in$`, s.uiNoControls)
	sc.Step(`^"([^"]*)" is pressed in the web UI$`, s.uiPress)
	sc.Step("^`flotilla describe rollout --watch` follows the rollout of \"([^\"]*)\" live until it ends \"([^\"]*)\", exiting non-zero$", s.describeWatch)
	s.registerUIAppSteps(sc)
}

// browser is a headless Chromium showing flotilla's web UI.
type browser struct {
	ctx    context.Context
	cancel context.CancelFunc
	base   string
}

// uiWait bounds a wait for the page; uiRolloutWait one for a rollout's end.
const (
	uiWait        = 30 * time.Second
	uiRolloutWait = 4 * time.Minute
)

// recorder notes, on the page, every view of the grid it shows (each
// wave's clusters and phases) and marks the page, so that a step can tell
// what the page went through and that it was never reloaded.
const recorder = `(() => {
  window.__flotillaMark = "loaded once";
  window.__flotillaSeen = [];
  const snap = () => {
    const phase = document.getElementById("phase");
    const waves = [...document.querySelectorAll("[data-wave]")].map((w) =>
      w.dataset.wave + ":" + [...w.querySelectorAll("[data-cluster]")].map((c) => c.dataset.cluster + "=" + c.dataset.phase).join(","));
    if (!phase) return;
    const s = phase.dataset.phase + " " + waves.join(" ");
    const seen = window.__flotillaSeen;
    if (seen[seen.length - 1] !== s) seen.push(s);
  };
  new MutationObserver(snap).observe(document.getElementById("main"), { childList: true, subtree: true });
})()`

// openUI opens the web UI in a new browser and logs in as a person does
// (unless server.anonymousRead lets the page be read without): the
// rollouts page answers with the login form, the scenario's API token is
// typed in and sent.
func (s *scenario) openUI(ctx context.Context) error {
	b, err := s.startBrowser(ctx)
	if err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/")); err != nil {
		return err
	}
	if !s.w.anonymousRead {
		if err := b.login(ctx, s.w.apiToken); err != nil {
			return err
		}
	}
	if err := b.until(ctx, uiWait, "the page is live", `document.body.dataset.live === "true"`); err != nil {
		return err
	}
	return b.run(ctx, uiWait, chromedp.Evaluate(recorder, nil))
}

// login logs in at the login page the browser shows, as a person does:
// the token typed into #login-token, #login-submit pressed.
func (b *browser) login(ctx context.Context, token string) error {
	if err := b.until(ctx, uiWait, "the login form", `document.querySelector('#login-form #login-token')`); err != nil {
		return err
	}
	return b.run(ctx, uiWait,
		chromedp.SendKeys(`#login-token`, token, chromedp.ByQuery),
		chromedp.Click(`#login-submit`, chromedp.ByQuery))
}

// startBrowser starts a headless Chromium for the scenario's web UI.
func (s *scenario) startBrowser(ctx context.Context) (*browser, error) {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return nil, errors.New("no chromium on PATH: `make deps` installs Debian's chromium")
	}
	// The profile and what chromium leaves in TMPDIR (its singleton
	// socket) go with the scenario's files, not into /tmp for good.
	tmp := filepath.Join(s.w.dir, "chromium-tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 1000),
		chromedp.UserDataDir(filepath.Join(s.w.dir, "chromium")), chromedp.Env("TMPDIR="+tmp))
	// The browser outlives this step; the scenario's cleanup ends it.
	actx, acancel := chromedp.NewExecAllocator(context.WithoutCancel(ctx), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	b := &browser{ctx: bctx, cancel: func() { bcancel(); acancel() }, base: s.w.flotilla.url()}
	s.onCleanup(b.cancel)
	s.w.browser = b
	if err := chromedp.Run(bctx); err != nil { // starts the browser
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	return b, nil
}

// run runs actions in the page, within d, or until the step's ctx ends.
func (b *browser) run(ctx context.Context, d time.Duration, actions ...chromedp.Action) error {
	// Actions run in the browser's context; the step's only bounds them.
	bctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	return chromedp.Run(bctx, actions...) //nolint:contextcheck // chromedp runs in the browser's context
}

// until waits up to d for the JavaScript expression cond to be true.
func (b *browser) until(ctx context.Context, d time.Duration, what, cond string) error {
	deadline := time.Now().Add(d)
	for {
		var ok bool
		err := b.run(ctx, uiWait, chromedp.Evaluate("!!("+cond+")", &ok))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			var page string
			// The header (who is logged in) and main, or the login page.
			_ = b.run(ctx, 5*time.Second, chromedp.Evaluate(`document.body.innerText`, &page))
			if err == nil {
				err = errors.New("none")
			}
			return fmt.Errorf("the web UI did not show that %s within %s; the page shows:\n%s\n(last error: %w)", what, d, truncateText(page, 2000), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// click clicks the element selector finds, once there is one. The page
// redraws its views as the stream reports changes, so the element is
// found and clicked in one go, in the page.
func (b *browser) click(ctx context.Context, selector string) error {
	find := fmt.Sprintf(`document.querySelector(%q)`, selector)
	if err := b.until(ctx, uiWait, "an element "+selector, find); err != nil {
		return err
	}
	return b.run(ctx, uiWait, chromedp.Evaluate(find+".click()", nil))
}

// notReloaded fails if the page was loaded again since it was opened.
func (b *browser) notReloaded(ctx context.Context) error {
	var mark string
	if err := b.run(ctx, uiWait, chromedp.Evaluate(`window.__flotillaMark || ""`, &mark)); err != nil {
		return err
	}
	if mark != "loaded once" {
		return errors.New("the web UI reloaded the page")
	}
	return nil
}

// shot saves a screenshot of the page as docs/ui-<name>.png when
// FLOTILLA_UI_SCREENSHOTS names the docs directory (`make screenshots`).
func (b *browser) shot(ctx context.Context, name string) error {
	dir := os.Getenv("FLOTILLA_UI_SCREENSHOTS")
	if dir == "" {
		return nil
	}
	var png []byte
	if err := b.run(ctx, uiWait, chromedp.FullScreenshot(&png, 100)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "ui-"+name+".png"), png, 0o644)
}

func (s *scenario) uiBrowser() (*browser, error) {
	if s.w.browser == nil {
		return nil, errors.New("the web UI is not open: a step must open it first")
	}
	return s.w.browser, nil
}

func (s *scenario) uiLists(ctx context.Context, version string) error {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the rollout list holds "+id, fmt.Sprintf(`document.querySelector('#rollouts tr[data-rollout=%q]')`, id)); err != nil {
		return err
	}
	if err := b.shot(ctx, "rollouts"); err != nil {
		return err
	}
	return b.notReloaded(ctx)
}

func (s *scenario) uiOpenRollout(ctx context.Context, version string) error {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return err
	}
	// A click, as a user would: the page changes without loading again.
	if err := b.click(ctx, fmt.Sprintf(`#rollouts tr[data-rollout=%q] a`, id)); err != nil {
		return err
	}
	return b.until(ctx, uiWait, "rollout "+id, fmt.Sprintf(`document.querySelector('section[data-rollout=%q] #phase')`, id))
}

// seen is what the recorder noted: each view as "<phase> 1:c1=...,... 2:...".
func (b *browser) seen(ctx context.Context) ([]string, error) {
	var out []string
	err := b.run(ctx, uiWait, chromedp.Evaluate(`window.__flotillaSeen || []`, &out))
	return out, err
}

func (s *scenario) uiShowsWaves(ctx context.Context, version, phase string) error {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return err
	}
	all := fmt.Sprintf(`document.querySelector('section[data-rollout=%q] #phase').dataset.phase === %q &&
		[...document.querySelectorAll('#grid [data-cluster]')].every((c) => c.dataset.phase === %q)`, id, phase, phase)
	if err := b.until(ctx, uiRolloutWait, "rollout "+id+" and every cluster are "+phase, all); err != nil {
		return err
	}
	if err := b.shot(ctx, "rollout"); err != nil {
		return err
	}
	views, err := b.seen(ctx)
	if err != nil {
		return err
	}
	if err := wavesSeen(views, phase); err != nil {
		return err
	}
	return b.notReloaded(ctx)
}

// wavesSeen checks the views a page went through: one with a cluster of
// wave 1 rolling out while every cluster of wave 2 waited, then, later,
// every cluster in phase.
func wavesSeen(views []string, phase string) error {
	rolling := -1
	for i, v := range views {
		fields := strings.Fields(v)
		if len(fields) != 3 {
			continue
		}
		w1, w2 := fields[1], fields[2]
		if rolling < 0 && (strings.Contains(w1, "=Applying") || strings.Contains(w1, "=Progressing")) &&
			!strings.Contains(strings.ReplaceAll(w2, "=Pending", ""), "=") {
			rolling = i
		}
		if rolling >= 0 && i > rolling && strings.Count(v, "="+phase) == strings.Count(v, "=") {
			return nil
		}
	}
	return fmt.Errorf("the web UI did not show wave 1 rolling out while wave 2 waited, then every cluster %s; it showed:\n%s",
		phase, strings.Join(views, "\n"))
}

// timelineTypes lists the timeline's events as "<type> <cluster>".
func (b *browser) timelineTypes(ctx context.Context) ([]string, error) {
	var out []string
	err := b.run(ctx, uiWait, chromedp.Evaluate(`[...document.querySelectorAll('#timeline li')].map((li) => li.dataset.type + " " + li.dataset.cluster)`, &out))
	return out, err
}

func (s *scenario) uiTimeline(ctx context.Context, version string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	var want []string
	for _, wave := range s.w.waves {
		for _, c := range wave {
			want = append(want, "cluster.succeeded "+c)
		}
	}
	cond := `(() => { const t = [...document.querySelectorAll('#timeline li')].map((li) => li.dataset.type + " " + li.dataset.cluster);
		return ` + jsArray(append([]string{"rollout.started ", "rollout.succeeded "}, want...)) + `.every((w) => t.includes(w)); })()`
	if err := b.until(ctx, uiWait, "the timeline has the rollout's start, each cluster's success and its end", cond); err != nil {
		return err
	}
	got, err := b.timelineTypes(ctx)
	if err != nil {
		return err
	}
	start, end := slices.Index(got, "rollout.started "), slices.Index(got, "rollout.succeeded ")
	for _, w := range want {
		if i := slices.Index(got, w); i < start || i > end {
			return fmt.Errorf("the timeline has %q outside the rollout's start and end:\n%s", w, strings.Join(got, "\n"))
		}
	}
	return nil
}

func jsArray(ss []string) string {
	b, _ := json.Marshal(ss)
	return string(b)
}

// openRollout loads the page of the rollout of version by its address,
// as a link from elsewhere would.
func (s *scenario) openRollout(ctx context.Context, version string) (*browser, string, error) {
	b, id, err := s.uiRollout(ctx, version)
	if err != nil {
		return nil, "", err
	}
	return b, id, b.run(ctx, uiWait, chromedp.Navigate(b.base+"/ui/#/rollouts/"+id))
}

// uiRollout is the open browser and the id of the rollout of version.
func (s *scenario) uiRollout(ctx context.Context, version string) (*browser, string, error) {
	b, err := s.uiBrowser()
	if err != nil {
		return nil, "", err
	}
	id, err := s.rolloutID(ctx, version)
	return b, id, err
}

func (s *scenario) uiReason(ctx context.Context, version, phase, cluster string) error {
	b, id, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	cond := fmt.Sprintf(`document.querySelector('#phase') && document.querySelector('#phase').dataset.phase === %q &&
		document.querySelector('#reason') && document.querySelector('#reason').textContent.includes(%q)`, phase, cluster)
	if err := b.until(ctx, uiWait, "rollout "+id+" is "+phase+" with a reason naming "+cluster, cond); err != nil {
		return err
	}
	return b.shot(ctx, "rollout-rolled-back")
}

func (s *scenario) uiNoControls(ctx context.Context, version string) error {
	b, _, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	return b.until(ctx, uiWait, "no controls and a link to log in",
		`document.querySelector('#controls-hint') && !document.querySelector('#controls') && !document.querySelector('[id^="approve-wave-"]') && document.querySelector('#login-link')`)
}

func (s *scenario) uiPress(ctx context.Context, label string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	find := fmt.Sprintf(`[...document.querySelectorAll('main button')].find((b) => b.textContent.trim() === %q)`, label)
	if err := b.until(ctx, uiWait, "a button "+label, find); err != nil {
		return err
	}
	if err := b.shot(ctx, "controls"); err != nil {
		return err
	}
	if err := b.run(ctx, uiWait, chromedp.Evaluate(find+".click()", nil)); err != nil {
		return err
	}
	return b.until(ctx, uiWait, label+" recorded", `!document.getElementById("notice").hidden && document.getElementById("notice").textContent.includes("recorded")`)
}

// describeWatch runs `flotilla describe rollout ID --watch` while the
// rollout is in flight: it must redraw it as it changes and end with it,
// exiting non-zero for any end but Succeeded.
func (s *scenario) describeWatch(ctx context.Context, version, phase string) error {
	id, err := s.rolloutID(ctx, version)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, uiRolloutWait)
	defer cancel()
	cmd := exec.CommandContext(wctx, flotillaBin, "describe", "rollout", id, "--watch", "--interval", "1h", "--server", s.w.flotilla.url())
	cmd.Env = s.cliEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || wctx.Err() != nil {
		return fmt.Errorf("describe --watch ended with %w, want a non-zero exit when the rollout ended:\n%s%s", err, stdout.String(), stderr.String())
	}
	views := strings.Split(stdout.String(), "--- ")
	if len(views) < 3 || !strings.Contains(views[len(views)-1], "Phase:        "+phase) ||
		!strings.Contains(stderr.String(), "ended "+phase) {
		return fmt.Errorf("describe --watch drew %d views, the last not %s, or did not say so:\n%s%s", len(views)-1, phase, stdout.String(), stderr.String())
	}
	return nil
}
