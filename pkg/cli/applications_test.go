package cli_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/api"
	"github.com/flotilla-cd/flotilla/pkg/cli"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

var (
	appsAt = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	hook   = rollout.Seen{Tag: "1.4.0", Digest: "sha256:aaaaaaaaaaaaaaaaaaaa", Source: "webhook", At: appsAt, EventID: "h1"}
	polled = rollout.Seen{Tag: "1.5.0", Digest: "sha256:bbbbbbbbbbbbbbbbbbbb", Source: "poll", At: appsAt.Add(5 * time.Minute), EventID: "p1"}
	apps   = []api.ApplicationView{
		{Name: "shop", Kind: "image", Repository: "registry.test/shop", PollInterval: "5m0s",
			Deployed: &api.Deployment{Tag: "1.4.0", Digest: hook.Digest, Rollout: "shop-1", At: appsAt},
			Latest:   &api.Latest{Tag: "1.5.0", Rollout: "shop-2", Phase: "Progressing"},
			LastSeen: &polled, LastWebhook: &hook, WebhookSilent: true,
			LastSkipped: &rollout.Skipped{Tag: "2.0.0", Source: "webhook", Outcome: "skipped", At: appsAt.Add(time.Minute),
				Reason: "2.0.0 is a major upgrade of 1.4.0; track MinorVersion allows minor and patch upgrades only"},
			Silence: &rollout.Silence{Tag: "1.5.0", Digest: polled.Digest, Found: polled.At, LastWebhook: &hook}},
		{Name: "site", Kind: "git", Repository: "https://git.test/site", Branch: "main"},
	}
)

func TestPrintApplications(t *testing.T) {
	var b strings.Builder
	cli.PrintApplications(&b, apps, appsAt.Add(10*time.Minute))
	want := `APPLICATION  DEPLOYED  ROLLING OUT  LAST SEEN  SOURCE  SEEN  WEBHOOK               LAST SKIPPED     WHY
shop         1.4.0     1.5.0        1.5.0      poll    5m0s  silent: missed 1.5.0  2.0.0 (skipped)  2.0.0 is a major upgrade of 1.4.0; track MinorVersion allows minor and patch upgrades only
site         -         -            -          -       -     ok                    -                -
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("get applications (-want +got)\n%s", diff)
	}
}

func TestDescribeApplication(t *testing.T) {
	var b strings.Builder
	cli.DescribeApplication(&b, apps[0], appsAt.Add(10*time.Minute))
	want := `Application:  shop
Kind:         image
Repository:   registry.test/shop
Polled:       5m0s
Deployed:     1.4.0 sha256:aaaaaaaaaaaa (rollout shop-1, 2026-11-28T12:00:00Z, 10m0s ago)
Latest:       1.5.0 (rollout shop-2, Progressing)
Last seen:    1.5.0 sha256:bbbbbbbbbbbb (poll, 2026-11-28T12:05:00Z, 5m0s ago)
Last webhook: 1.4.0 sha256:aaaaaaaaaaaa (webhook, 2026-11-28T12:00:00Z, 10m0s ago)
Last skipped: 2.0.0  (skipped, webhook, 2026-11-28T12:01:00Z, 9m0s ago): 2.0.0 is a major upgrade of 1.4.0; track MinorVersion allows minor and patch upgrades only
Webhook:      SILENT: a poll found 1.5.0 sha256:bbbbbbbbbbbb (2026-11-28T12:05:00Z, 5m0s ago) that no webhook announced; the last webhook brought 1.4.0 2026-11-28T12:00:00Z, 10m0s ago
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("describe application (-want +got)\n%s", diff)
	}
}
