package features

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/cucumber/godog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-cd/flotilla/pkg/cluster"
	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// The web UI's application page (an application's history and status),
// its fleet map (clusters x applications, with health) and how a failed
// cluster stands apart from those reverted because of it (#30 item 5).
// Every Then step reads the page and holds it against the clusters.

func (s *scenario) registerUIAppSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the application page of "([^"]*)" is opened from the (rollouts list|fleet map)$`, s.uiOpenApplication)
	sc.Step(`^the web UI's application page draws each cluster running "([^"]*)" after "([^"]*)", as its primary does$`, s.uiHistoryRan)
	sc.Step(`^the web UI's application page draws cluster "([^"]*)" failing "([^"]*)" while the others ran it and were put back to "([^"]*)", as their primaries run$`, s.uiHistoryFailed)
	sc.Step(`^the fleet map of the web UI shows each cluster running "([^"]*)" of "([^"]*)" as its primary does, reachable with Flagger ready$`, s.uiFleetMap)
	sc.Step(`^the fleet map of the web UI shows cluster "([^"]*)" failed and the others of the rollout of "([^"]*)" reverted$`, s.uiFleetFailed)
	sc.Step(`^the web UI's rollout of "([^"]*)" shows cluster "([^"]*)" failed, apart from the clusters reverted because of it$`, s.uiRolloutFailed)
	sc.Step(`^the web UI's application page says "([^"]*)" was skipped, the reason naming "([^"]*)", brought by a (webhook|poll), without a reload$`, s.uiSkipped)
	sc.Step(`^the fleet map of the web UI shows cluster "([^"]*)" unreachable, and "([^"]*)" reachable with Flagger ready$`, s.uiUnreachable)
	sc.Step(`^the fleet map is open in the web UI, noting each state its cells show$`, s.uiFleetRecorded)
	sc.Step(`^the fleet map of the web UI shows cluster "([^"]*)" drifted, running what its primary runs, in its own colour, and "([^"]*)" running "([^"]*)" as its primary does$`, s.uiFleetDrifted)
	sc.Step(`^the fleet map of the web UI shows cluster "([^"]*)" reverting its drift to "([^"]*)", then running "([^"]*)" as its primary does, without a reload$`, s.uiFleetReverted)
}

// lanesJS reads the application page's history: each cluster's versions,
// the version it runs now, and the versions it failed.
const lanesJS = `(() => { const out = {};
  for (const l of document.querySelectorAll('#history li.lane[data-clusters]')) {
    const failed = [...l.querySelectorAll('.pin[data-kind="failed"]')].map((p) => p.dataset.version);
    for (const c of l.dataset.clusters.split(",")) out[c] = { versions: l.dataset.versions.split(","), now: l.dataset.now, failed };
  }
  return out; })()`

// lane is one cluster's history as the page draws it.
type lane struct {
	Versions []string `json:"versions"`
	Now      string   `json:"now"`
	Failed   []string `json:"failed"`
}

func (s *scenario) uiOpenApplication(ctx context.Context, app, from string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	// Clicks, as a user would: the page changes without loading again.
	link := fmt.Sprintf(`#rollouts a[href="#/applications/%s"]`, app)
	if from == "fleet map" {
		if err := b.click(ctx, `a[data-nav="fleet"]`); err != nil {
			return err
		}
		link = fmt.Sprintf(`#clusters thead a[href="#/applications/%s"]`, app)
	} else if err := b.click(ctx, `a[data-nav="rollouts"]`); err != nil {
		return err
	}
	if err := b.click(ctx, link); err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the application page of "+app, fmt.Sprintf(`document.querySelector('section[data-application=%q] #app-status')`, app)); err != nil {
		return err
	}
	return b.notReloaded(ctx)
}

// uiPoll is how often a step reads the page again while it waits.
const uiPoll = 250 * time.Millisecond

func sleepCtx(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(uiPoll):
		return nil
	}
}

// uiLanes waits until the page's history satisfies ok (its error says
// what is missing), and returns it.
func (s *scenario) uiLanes(ctx context.Context, what string, ok func(map[string]lane) error) (map[string]lane, error) {
	b, err := s.uiBrowser()
	if err != nil {
		return nil, err
	}
	var got map[string]lane
	last := errors.New("no history drawn")
	for range int(uiRolloutWait / uiPoll) {
		if err := b.run(ctx, uiWait, chromedp.Evaluate(lanesJS, &got)); err != nil {
			return nil, err
		}
		if last = ok(got); last == nil {
			return got, b.notReloaded(ctx)
		}
		if err := sleepCtx(ctx); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("the application page did not draw that %s within %s: %w (it drew %+v)", what, uiRolloutWait, last, got)
}

// runsAsPrimary checks that the version the page says cluster runs now is
// what its primary runs, read from the cluster.
func (s *scenario) runsAsPrimary(ctx context.Context, cluster, version string) error {
	want, err := s.ref(version)
	if err != nil {
		return fmt.Errorf("the page says %s runs %s: %w", cluster, version, err)
	}
	got, err := s.primaryImages(ctx, cluster)
	if err != nil {
		return err
	}
	if got[cluster] != want {
		return fmt.Errorf("the page says %s runs %s (%s), its primary runs %s", cluster, version, want, got[cluster])
	}
	return nil
}

func (s *scenario) waveClusters() []string {
	var out []string
	for _, w := range s.w.waves {
		out = append(out, w...)
	}
	return out
}

func (s *scenario) uiHistoryRan(ctx context.Context, version, before string) error {
	clusters := s.waveClusters()
	ls, err := s.uiLanes(ctx, "each cluster ran "+before+" then "+version, func(ls map[string]lane) error {
		for _, c := range clusters {
			l, ok := ls[c]
			if !ok || len(l.Versions) < 2 || !slices.Equal(l.Versions[len(l.Versions)-2:], []string{before, version}) || l.Now != version {
				return fmt.Errorf("cluster %s: %+v", c, l)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range clusters {
		if err := s.runsAsPrimary(ctx, c, ls[c].Now); err != nil {
			return err
		}
	}
	return nil
}

func (s *scenario) uiHistoryFailed(ctx context.Context, failed, version, back string) error {
	clusters := s.waveClusters()
	ls, err := s.uiLanes(ctx, failed+" failed "+version+", the others put back to "+back, func(ls map[string]lane) error {
		for _, c := range clusters {
			l := ls[c]
			switch {
			case c == failed && (l.Now != back || !slices.Contains(l.Failed, version) || slices.Contains(l.Versions, version)):
				return fmt.Errorf("cluster %s, which failed: %+v", c, l)
			case c != failed && (len(l.Versions) < 2 || !slices.Equal(l.Versions[len(l.Versions)-2:], []string{version, back}) || len(l.Failed) > 0):
				return fmt.Errorf("cluster %s, put back: %+v", c, l)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range clusters {
		if err := s.runsAsPrimary(ctx, c, ls[c].Now); err != nil {
			return err
		}
	}
	b, _ := s.uiBrowser()
	return b.shot(ctx, "application")
}

// mapCell is a cluster's row of the fleet map: its cell of one
// application and its health.
type mapCell struct {
	Tag       string `json:"tag"`
	State     string `json:"state"`
	Reachable string `json:"reachable"`
	Flagger   string `json:"flagger"`
	// Image is what a drifted cell says its primary runs; Text the cell's
	// text, as a user reads it.
	Image string `json:"image"`
	Text  string `json:"text"`
}

func (s *scenario) uiMap(ctx context.Context, app, what string, ok func(map[string]mapCell) error) (map[string]mapCell, error) {
	b, err := s.uiBrowser()
	if err != nil {
		return nil, err
	}
	if err := b.click(ctx, `a[data-nav="fleet"]`); err != nil {
		return nil, err
	}
	read := fmt.Sprintf(`(() => { const out = {};
	  for (const row of document.querySelectorAll('#clusters tbody tr[data-cluster]')) {
	    const cell = row.querySelector('td[data-app=%q]'), hl = row.querySelector('td.health');
	    out[row.dataset.cluster] = { tag: cell ? cell.dataset.tag || "" : "", state: cell ? cell.dataset.state : "",
	      reachable: hl ? hl.dataset.reachable || "" : "", flagger: hl ? hl.dataset.flagger || "" : "",
	      image: cell ? cell.dataset.image || "" : "", text: cell ? cell.innerText : "" };
	  }
	  return out; })()`, app)
	var got map[string]mapCell
	var last error
	for range int(uiRolloutWait / uiPoll) {
		if err := b.run(ctx, uiWait, chromedp.Evaluate(read, &got)); err != nil {
			return nil, err
		}
		if last = ok(got); last == nil {
			return got, b.notReloaded(ctx)
		}
		if err := sleepCtx(ctx); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("the fleet map did not show that %s within %s: %w (it showed %+v)", what, uiRolloutWait, last, got)
}

func (s *scenario) uiFleetMap(ctx context.Context, version, app string) error {
	clusters := s.waveClusters()
	got, err := s.uiMap(ctx, app, "every cluster runs "+version+", reachable with Flagger ready", func(m map[string]mapCell) error {
		for _, c := range clusters {
			if x := m[c]; x.Tag != version || x.State != "ok" || x.Reachable != "true" || x.Flagger != "Ready" {
				return fmt.Errorf("cluster %s: %+v", c, x)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range clusters {
		// The world: the primary runs it, the API server answers (it was
		// just read), and Flagger wrote the canary's status.
		if err := s.runsAsPrimary(ctx, c, got[c].Tag); err != nil {
			return err
		}
		cl, err := clientsFor(c)
		if err != nil {
			return err
		}
		cn, err := cl.Flagger.FlaggerV1beta1().Canaries(s.w.namespace).Get(ctx, s.w.workload, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading the canary in %s: %w", c, err)
		}
		if cn.Status.Phase == "" {
			return fmt.Errorf("the map says Flagger is ready in %s, but its canary carries no status from Flagger", c)
		}
	}
	return nil
}

func (s *scenario) uiFleetFailed(ctx context.Context, failed, version string) error {
	clusters := s.waveClusters()
	got, err := s.uiMap(ctx, s.w.app, failed+" failed, the others reverted", func(m map[string]mapCell) error {
		for _, c := range clusters {
			want := "reverted"
			if c == failed {
				want = "failed"
			}
			if x := m[c]; x.State != want {
				return fmt.Errorf("cluster %s: %+v, want %s", c, x, want)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range clusters {
		if got[c].Tag == version {
			return fmt.Errorf("the map says %s runs %s, which was rolled back", c, version)
		}
		if err := s.runsAsPrimary(ctx, c, got[c].Tag); err != nil {
			return err
		}
	}
	b, _ := s.uiBrowser()
	return b.shot(ctx, "fleet")
}

// uiRolloutFailed checks the rollout page: the failed cluster says it
// failed the wave, and is drawn apart (its card's colour) from the
// clusters reverted because of it, which name it.
func (s *scenario) uiRolloutFailed(ctx context.Context, version, failed string) error {
	b, id, err := s.openRollout(ctx, version)
	if err != nil {
		return err
	}
	cond := fmt.Sprintf(`(() => { const cards = [...document.querySelectorAll('section[data-rollout=%q] #grid [data-cluster]')];
	  const bad = cards.find((c) => c.dataset.cluster === %q), others = cards.filter((c) => c !== bad && c.dataset.phase === "Reverted");
	  if (!bad || bad.dataset.outcome !== "failed" || !bad.innerText.includes("Failed") || !others.length) return false;
	  const bg = getComputedStyle(bad).backgroundColor;
	  return others.every((c) => c.dataset.outcome === "reverted" && c.innerText.includes("because " + %q + " failed") &&
	    getComputedStyle(c).backgroundColor !== bg); })()`, id, failed, failed)
	return b.until(ctx, uiRolloutWait, "cluster "+failed+" failed, drawn apart from those reverted because of it", cond)
}

func (s *scenario) uiSkipped(ctx context.Context, version, reason, source string) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	cond := fmt.Sprintf(`(() => { const sk = document.querySelector('#last-skipped[data-tag=%q]'), seen = document.querySelector('#last-seen [data-source]');
	  return sk && sk.querySelector('.why-skipped').textContent.includes(%q) && seen && seen.dataset.source === %q; })()`, version, reason, source)
	if err := b.until(ctx, uiRolloutWait, version+" skipped, naming "+reason, cond); err != nil {
		return err
	}
	// The world: no cluster runs it.
	for _, c := range s.waveClusters() {
		got, err := s.primaryImages(ctx, c)
		if err != nil {
			return err
		}
		if bad, _ := s.ref(version); got[c] == bad || strings.HasSuffix(got[c], ":"+version) {
			return fmt.Errorf("the page says %s was skipped, but %s's primary runs it", version, c)
		}
	}
	return b.notReloaded(ctx)
}

// uiUnreachable checks the map's health against what flotilla's own
// connection to each cluster answers: the frozen one does not, the other
// does.
func (s *scenario) uiUnreachable(ctx context.Context, down, up string) error {
	if _, err := s.uiMap(ctx, s.w.app, down+" unreachable, "+up+" reachable with Flagger ready", func(m map[string]mapCell) error {
		if x := m[down]; x.Reachable != "false" {
			return fmt.Errorf("cluster %s: %+v", down, x)
		}
		if x := m[up]; x.Reachable != "true" || x.Flagger != "Ready" {
			return fmt.Errorf("cluster %s: %+v", up, x)
		}
		return nil
	}); err != nil {
		return err
	}
	p, ok := s.w.proxied[down]
	if !ok {
		return fmt.Errorf("flotilla does not reach %s through a connection a step can freeze", down)
	}
	cfg, err := kube.RESTConfig(p.kubeconfig, "")
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := cluster.Reach(rctx, cfg); err == nil {
		return fmt.Errorf("the map says %s is unreachable, but its API server answers through flotilla's connection", down)
	}
	cl, ok := fleet.Cluster(up)
	if !ok {
		return fmt.Errorf("the fleet has no cluster %s", up)
	}
	if cfg, err = kube.RESTConfig(cl.Kubeconfig, ""); err != nil {
		return err
	}
	if pr, err := cluster.Reach(ctx, cfg); err != nil || !pr.Flagger {
		return fmt.Errorf("the map says %s is reachable with Flagger ready, but it answers %+v, %w", up, pr, err)
	}
	return nil
}

// cellRecorder notes, on the page, each state the fleet map's cells of
// application %q show, as "<cluster>=<state>:<version>" (the version a
// rollout in flight brings, else the one it runs), once per change.
const cellRecorder = `(() => {
  window.__flotillaCells = [];
  const last = {};
  const snap = () => {
    for (const cell of document.querySelectorAll('#clusters tbody tr[data-cluster] td[data-app=%q]')) {
      const c = cell.closest("tr").dataset.cluster, s = cell.dataset.state + ":" + (cell.dataset.next || cell.dataset.tag || "");
      if (last[c] !== s) { last[c] = s; window.__flotillaCells.push(c + "=" + s); }
    }
  };
  snap();
  new MutationObserver(snap).observe(document.getElementById("main"), { childList: true, subtree: true });
})()`

// uiFleetRecorded opens the fleet map, as a user would, and notes each
// state its cells go through from then on.
func (s *scenario) uiFleetRecorded(ctx context.Context) error {
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	if err := b.click(ctx, `a[data-nav="fleet"]`); err != nil {
		return err
	}
	if err := b.until(ctx, uiWait, "the fleet map", fmt.Sprintf(`document.querySelector('#clusters td[data-app=%q]')`, s.w.app)); err != nil {
		return err
	}
	return b.run(ctx, uiWait, chromedp.Evaluate(fmt.Sprintf(cellRecorder, s.w.app), nil))
}

// uiFleetDrifted checks that the map shows cluster drifted, saying what
// its primary runs, which is what the cluster's primary really runs and
// not the validated version; drawn in the drift's colour, which the
// legend names; and the other cluster running version, as its primary
// does.
func (s *scenario) uiFleetDrifted(ctx context.Context, cluster, other, version string) error {
	got, err := s.uiMap(ctx, s.w.app, cluster+" drifted, "+other+" running "+version, func(m map[string]mapCell) error {
		d := m[cluster]
		name := d.Image[strings.LastIndex(d.Image, "/")+1:]
		if d.State != "drifted" || d.Image == "" || !strings.Contains(d.Text, "drifted: runs "+name) {
			return fmt.Errorf("cluster %s: %+v", cluster, d)
		}
		if x := m[other]; x.Tag != version || x.State != "ok" {
			return fmt.Errorf("cluster %s: %+v", other, x)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The world: the drifted cluster's primary runs what the map says,
	// not the validated version; the other's runs the version.
	primary, err := s.primaryImages(ctx, cluster)
	if err != nil {
		return err
	}
	if primary[cluster] != got[cluster].Image {
		return fmt.Errorf("the map says %s's primary runs %s, it runs %s", cluster, got[cluster].Image, primary[cluster])
	}
	if validated, err := s.ref(version); err != nil || primary[cluster] == validated {
		return fmt.Errorf("the map says %s drifted, but its primary runs the validated %s (%s), %w", cluster, version, primary[cluster], err)
	}
	if err := s.runsAsPrimary(ctx, other, version); err != nil {
		return err
	}
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	cell := func(c string) string { return fmt.Sprintf(`#clusters tr[data-cluster=%q] td[data-app=%q]`, c, s.w.app) }
	colours := fmt.Sprintf(`(() => { const look = (sel) => { const st = getComputedStyle(document.querySelector(sel)); return st.backgroundColor + " " + st.backgroundImage; };
	  const legend = document.querySelector('#states-legend li[data-state="drifted"]');
	  return legend && legend.innerText.includes("drifted") && look(%q) !== look(%q); })()`, cell(cluster), cell(other))
	if err := b.until(ctx, uiWait, cluster+" drawn in the drift's colour, which the legend names", colours); err != nil {
		return err
	}
	if err := b.shot(ctx, "fleet-drift"); err != nil {
		return err
	}
	return b.notReloaded(ctx)
}

// uiFleetReverted checks, from what the map's cells went through since
// the map was opened, that cluster showed its drift being reverted to
// version, then ran version, as its primary does.
func (s *scenario) uiFleetReverted(ctx context.Context, cluster, version, now string) error {
	if _, err := s.uiMap(ctx, s.w.app, cluster+" running "+now, func(m map[string]mapCell) error {
		if x := m[cluster]; x.Tag != now || x.State != "ok" {
			return fmt.Errorf("cluster %s: %+v", cluster, x)
		}
		return nil
	}); err != nil {
		return err
	}
	b, err := s.uiBrowser()
	if err != nil {
		return err
	}
	var seen []string
	if err := b.run(ctx, uiWait, chromedp.Evaluate(`window.__flotillaCells || []`, &seen)); err != nil {
		return err
	}
	reverting := slices.Index(seen, cluster+"=reverting:"+version)
	if reverting < 0 || slices.Index(seen[reverting:], cluster+"=ok:"+now) < 0 {
		return fmt.Errorf("the fleet map did not show %s reverting its drift to %s, then running %s; its cells went through:\n%s",
			cluster, version, now, strings.Join(seen, "\n"))
	}
	fmt.Printf("the fleet map's cells went through: %s\n", strings.Join(seen, ", "))
	if err := s.runsAsPrimary(ctx, cluster, now); err != nil {
		return err
	}
	return b.notReloaded(ctx)
}
