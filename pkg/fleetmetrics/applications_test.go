package fleetmetrics_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flotilla-cd/flotilla/pkg/fleetmetrics"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// flotilla_application_webhook_silent is read from the state at scrape
// time: 1 from a poll's push of a version no webhook announced until a
// webhook's push; reported only while active.
func TestWebhookSilent(t *testing.T) {
	s, err := store.Open(filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	repo := embedded.NewRepo(s, nil)
	reg := prometheus.NewPedanticRegistry()
	active := true
	if _, err := fleetmetrics.NewSilence(repo, []string{"shop", "site"}, reg, func() bool { return active }, nil); err != nil {
		t.Fatal(err)
	}
	saw := func(p rollout.Seen) {
		t.Helper()
		if err := repo.UpdateApp(t.Context(), "shop", func(st *rollout.AppState) error { st.Saw(p); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(shop int) {
		t.Helper()
		want := "# HELP flotilla_application_webhook_silent 1 while an application's webhook is silent: a poll found a version no webhook announced (event application.webhook.missed); 0 once a webhook of the application arrives again. Read from the state at scrape time.\n" +
			"# TYPE flotilla_application_webhook_silent gauge\n" +
			"flotilla_application_webhook_silent{application=\"shop\"} " + string(rune('0'+shop)) + "\n" +
			"flotilla_application_webhook_silent{application=\"site\"} 0\n"
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), fleetmetrics.MetricWebhookSilent); err != nil {
			t.Error(err)
		}
	}
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	expect(0)
	saw(rollout.Seen{Tag: "1.0.0", Source: rollout.SourceWebhook, At: at})
	expect(0)
	saw(rollout.Seen{Tag: "1.1.0", Source: rollout.SourcePoll, At: at.Add(time.Minute)})
	expect(1)
	saw(rollout.Seen{Tag: "1.2.0", Source: rollout.SourceWebhook, At: at.Add(2 * time.Minute)})
	expect(0)
	active = false
	if n, err := testutil.GatherAndCount(reg, fleetmetrics.MetricWebhookSilent); err != nil || n != 0 {
		t.Errorf("inactive: %d series, %v; want none", n, err)
	}
}
