package features

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/api"
)

// What flotilla knows of each application (#30 items 2 and 5): read from
// the journal (the sink), flotilla's /metrics, `flotilla get
// applications`, `flotilla describe application` and the API.
func (s *scenario) registerApplicationSteps(sc *godog.ScenarioContext) {
	sc.Step(`^the silent-receiver alarm fires for "([^"]*)": "([^"]*)" found by a poll, the last webhook having brought "([^"]*)"$`, s.silentAlarmFires)
	sc.Step(`^the silent-receiver alarm of "([^"]*)" is cleared, the last webhook having brought "([^"]*)"$`, s.silentAlarmCleared)
	sc.Step("^`flotilla get applications` says \"([^\"]*)\" runs \"([^\"]*)\", last saw \"([^\"]*)\" from a \"([^\"]*)\" and (skipped|rejected) it because \"([^\"]*)\"$", s.getApplicationsSaysSkipped)
	sc.Step(`^the API says "([^"]*)" (skipped|rejected) "([^"]*)" from a "([^"]*)" because "([^"]*)", the fleet running "([^"]*)" from its rollout$`, s.apiSaysSkipped)
	sc.Step("^`flotilla describe application ([^`]*)` says the last push skipped was \"([^\"]*)\", because \"([^\"]*)\"$", s.describeApplicationSaysSkipped)
}

// silentAlarmFires: a poll found version of app that no webhook had
// announced, and flotilla says so everywhere it should: the journal
// (application.webhook.missed naming the version, its digest, when it was
// found and the last webhook seen), /metrics (the gauge at 1), `flotilla
// get applications` (last seen from a poll, webhook silent) and the API.
func (s *scenario) silentAlarmFires(ctx context.Context, app, version, lastWebhook string) error {
	e, err := s.w.sink.waitFor(ctx, "application.webhook.missed of "+version, func(e cloudevents.Event) bool {
		m, err := events.Decode[events.WebhookMissed](e)
		return e.Type() == events.TypeApplicationWebhookMissed && err == nil && m.Application == app && m.Version == version
	})
	if err != nil {
		return err
	}
	m, _ := events.Decode[events.WebhookMissed](e)
	if m.Digest != s.w.digests[version] || m.Found.IsZero() || m.LastWebhookVersion != lastWebhook || m.LastWebhook.IsZero() ||
		!strings.HasPrefix(m.PushID, "poll/") {
		return fmt.Errorf("application.webhook.missed says %+v: want %s@%s found by a poll, the last webhook %s", m, version, s.w.digests[version], lastWebhook)
	}
	if err := s.waitSilentGauge(ctx, app, 1); err != nil {
		return err
	}
	row, err := s.applicationsRow(ctx, app)
	if err != nil {
		return err
	}
	if row["LAST SEEN"] != version || row["SOURCE"] != "poll" || row["WEBHOOK"] != "silent: missed "+version {
		return fmt.Errorf("flotilla get applications says %v: want last seen %s from a poll, webhook silent", row, version)
	}
	var v api.ApplicationView
	if err := s.getJSON(ctx, "/api/v1/applications/"+app, &v); err != nil {
		return err
	}
	if !v.WebhookSilent || v.Silence == nil || v.Silence.Tag != version || v.Silence.Digest != s.w.digests[version] ||
		v.Silence.LastWebhook == nil || v.Silence.LastWebhook.Tag != lastWebhook || v.LastSeen == nil || v.LastSeen.Source != "poll" {
		return fmt.Errorf("GET /api/v1/applications/%s: %+v (silence %+v): want its webhook silent, missing %s", app, v, v.Silence, version)
	}
	return nil
}

// silentAlarmCleared: a webhook of app arrived again; the gauge is 0,
// `flotilla get applications` and the API say the webhook is fine.
func (s *scenario) silentAlarmCleared(ctx context.Context, app, version string) error {
	if err := s.waitSilentGauge(ctx, app, 0); err != nil {
		return err
	}
	row, err := s.applicationsRow(ctx, app)
	if err != nil {
		return err
	}
	// The last push seen is the version; a poll may have seen it too,
	// after its webhook (a poll that read the state just before the
	// webhook's rollout started): that is no alarm.
	if row["LAST SEEN"] != version || row["WEBHOOK"] != "ok" {
		return fmt.Errorf("flotilla get applications says %v: want last seen %s, webhook ok", row, version)
	}
	var v api.ApplicationView
	if err := s.getJSON(ctx, "/api/v1/applications/"+app, &v); err != nil {
		return err
	}
	if v.WebhookSilent || v.Silence != nil || v.LastWebhook == nil || v.LastWebhook.Tag != version {
		return fmt.Errorf("GET /api/v1/applications/%s: %+v: want its webhook fine, the last one %s", app, v, version)
	}
	return nil
}

// waitSilentGauge waits (at most 20 s) for
// flotilla_application_webhook_silent{application=app}, summed over the
// replicas in scale-out mode (one reports it), to be want.
func (s *scenario) waitSilentGauge(ctx context.Context, app string, want float64) error {
	procs := s.w.flotilla.replicas
	if len(procs) == 0 {
		procs = []*flotillaProcess{s.w.flotilla}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		sum, series := 0.0, 0
		for _, p := range procs {
			v, ok, err := scrapeSilent(ctx, p.url(), app)
			if err != nil {
				return err
			}
			if ok {
				sum, series = sum+v, series+1
			}
		}
		if series > 0 && sum == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("flotilla_application_webhook_silent{application=%q} is %v (%d series), want %v", app, sum, series, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// scrapeSilent reads flotilla_application_webhook_silent of app from one
// flotilla at base; ok is false when it does not report it.
func scrapeSilent(ctx context.Context, base, app string) (v float64, ok bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = resp.Body.Close() }()
	want := `flotilla_application_webhook_silent{application="` + app + `"} `
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, found := strings.CutPrefix(sc.Text(), want); found {
			if _, err := fmt.Sscan(rest, &v); err != nil {
				return 0, false, fmt.Errorf("reading %q: %w", sc.Text(), err)
			}
			ok = true
		}
	}
	return v, ok, sc.Err()
}

// columns splits a line of a table tabwriter padded (two spaces or more
// between cells).
var columns = regexp.MustCompile(`\s{2,}`)

// applicationsRow runs `flotilla get applications` and returns app's row
// by column.
func (s *scenario) applicationsRow(ctx context.Context, app string) (map[string]string, error) {
	out, err := s.flotillaCLI(ctx, "get", "applications")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := columns.Split(strings.TrimSpace(lines[0]), -1)
	for _, l := range lines[1:] {
		cells := columns.Split(strings.TrimSpace(l), -1)
		if len(cells) == 0 || cells[0] != app {
			continue
		}
		if len(cells) != len(header) {
			return nil, fmt.Errorf("flotilla get applications: a row of %d cells under %d headers:\n%s", len(cells), len(header), out)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		return row, nil
	}
	return nil, fmt.Errorf("flotilla get applications lists no %s:\n%s", app, out)
}

func (s *scenario) getApplicationsSaysSkipped(ctx context.Context, app, deployed, version, source, outcome, reason string) error {
	row, err := s.applicationsRow(ctx, app)
	if err != nil {
		return err
	}
	if row["DEPLOYED"] != deployed || row["LAST SEEN"] != version || row["SOURCE"] != source ||
		row["LAST SKIPPED"] != version+" ("+outcome+")" || !strings.Contains(row["WHY"], reason) {
		return fmt.Errorf("flotilla get applications says %v: want %s deployed, %s last seen from a %s and %s because %q", row, deployed, version, source, outcome, reason)
	}
	return nil
}

func (s *scenario) apiSaysSkipped(ctx context.Context, app, outcome, version, source, reason, deployed string) error {
	var v api.ApplicationView
	if err := s.getJSON(ctx, "/api/v1/applications/"+app, &v); err != nil {
		return err
	}
	k := v.LastSkipped
	// A push verify refused names the digest its webhook said, if any.
	if k == nil || k.Tag != version || k.Digest != s.w.digests[version] && (outcome != "rejected" || k.Digest != "") || k.Source != source || k.Outcome != outcome ||
		!strings.Contains(k.Reason, reason) || k.At.IsZero() {
		return fmt.Errorf("GET /api/v1/applications/%s: last skipped %+v, want %s@%s from a %s %s because %q", app, k, version, s.w.digests[version], source, outcome, reason)
	}
	id, err := s.rolloutID(ctx, deployed)
	if err != nil {
		return err
	}
	if d := v.Deployed; d == nil || d.Tag != deployed || d.Digest != s.w.digests[deployed] || d.Rollout != id || d.At.IsZero() {
		return fmt.Errorf("GET /api/v1/applications/%s: deployed %+v, want %s@%s by rollout %s", app, d, deployed, s.w.digests[deployed], id)
	}
	return nil
}

func (s *scenario) describeApplicationSaysSkipped(ctx context.Context, app, version, reason string) error {
	out, err := s.flotillaCLI(ctx, "describe", "application", app)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "Last skipped:"); ok {
			rest = strings.TrimSpace(rest)
			if !strings.HasPrefix(rest, version+" ") || !strings.Contains(rest, reason) {
				return fmt.Errorf("flotilla describe application %s says the last skipped is %q: want %s because %q", app, rest, version, reason)
			}
			return nil
		}
	}
	return fmt.Errorf("flotilla describe application %s names no last skipped push:\n%s", app, out)
}
