package plan_test

import (
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"

	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// A push plan skips is kept in the application's state with why, in the
// same handling as the rollout.skipped that says so: what the API and
// `flotilla get applications` answer to "I pushed and nothing happened".
func TestPlanKeepsWhyItSkipped(t *testing.T) {
	for _, tc := range []struct {
		name   string
		app    config.Application
		pushes []string // tags, in order, after 1.2.3 is deployed; the last is skipped
		reason string
	}{
		{name: "outside the track", app: application("app", image, config.TrackMinorVersion), pushes: []string{"2.0.0"},
			reason: "2.0.0 is a major upgrade of 1.2.3; track MinorVersion allows minor and patch upgrades only"},
		{name: "a tag filter", app: withDenyTags(application("app", image, config.TrackMinorVersion), `.*-rc.*`), pushes: []string{"1.2.4-rc1"},
			reason: "1.2.4-rc1 matches the application's denyTags pattern"},
		{name: "older than the baseline", app: application("app", image, config.TrackMinorVersion), pushes: []string{"1.2.2"},
			reason: "1.2.2 is older than the current 1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			repo := functiontest.NewRepo(t)
			fn := plan.New(newConfig(tc.app), repo, nil)
			if err := repo.UpdateApp(ctx, "app", func(st *rollout.AppState) error {
				st.DeployedTag, st.DeployedDigest = "1.2.3", "sha256:1.2.3"
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var last []functiontest.Emitted
			var id string
			for i, tag := range tc.pushes {
				id = "v" + string(rune('1'+i))
				evs, err := fn.Handle(ctx, verified(t, id, image, tag))
				if err != nil {
					t.Fatal(err)
				}
				last = summarize(t, evs)
			}
			if len(last) != 1 || last[0].Type != events.TypeRolloutSkipped {
				t.Fatalf("the last push: %+v, want it skipped", last)
			}
			why := last[0].Data.(events.RolloutSkipped).Reason
			st, err := repo.App(ctx, "app")
			if err != nil {
				t.Fatal(err)
			}
			if st.LastSkipped == nil {
				t.Fatal("no LastSkipped")
			}
			tag := tc.pushes[len(tc.pushes)-1]
			want := rollout.Skipped{Tag: tag, Digest: "sha256:" + tag, Source: rollout.SourceWebhook, Outcome: rollout.OutcomeSkipped,
				Reason: why, At: st.LastSkipped.At, EventID: id}
			if diff := cmp.Diff(&want, st.LastSkipped); diff != "" {
				t.Errorf("LastSkipped (-want +got)\n%s", diff)
			}
			if !strings.HasPrefix(why, tc.reason) {
				t.Errorf("reason %q, want %q", why, tc.reason)
			}
			if st.LastSkipped.At.IsZero() {
				t.Error("LastSkipped.At is zero")
			}
		})
	}
}

// plan records a verified push in the application's state in the update
// it makes with its decision: what it saw and from where; a poll's push
// of a version no webhook announced reports the webhook silent
// (application.webhook.missed, the same again on a redelivery), a
// webhook's push ends it.
func TestPlanRecordsWhatItSaw(t *testing.T) {
	ctx := t.Context()
	repo := functiontest.NewRepo(t)
	fn := plan.New(newConfig(application("app", image, config.TrackMinorVersion)), repo, nil)
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	push := func(id, tag, source string, minute int) cloudevents.Event {
		t.Helper()
		e, err := events.New(id+"/"+events.TypeImageVerified, events.Source, events.TypeImageVerified,
			events.ImageVerified{Image: image, Tag: tag, Digest: "sha256:" + tag, Source: source})
		if err != nil {
			t.Fatal(err)
		}
		e.SetTime(at.Add(time.Duration(minute) * time.Minute))
		return e
	}
	missedOf := func(evs []cloudevents.Event) []events.WebhookMissed {
		t.Helper()
		var out []events.WebhookMissed
		for _, e := range evs {
			if e.Type() == events.TypeApplicationWebhookMissed {
				m, err := events.Decode[events.WebhookMissed](e)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, m)
			}
		}
		return out
	}
	hook1 := rollout.Seen{Tag: "1.0.0", Digest: "sha256:1.0.0", Source: rollout.SourceWebhook, At: at, EventID: "h1"}
	poll2 := rollout.Seen{Tag: "1.1.0", Digest: "sha256:1.1.0", Source: rollout.SourcePoll, At: at.Add(5 * time.Minute), EventID: "p2"}
	hook3 := rollout.Seen{Tag: "1.2.0", Digest: "sha256:1.2.0", Source: rollout.SourceWebhook, At: at.Add(6 * time.Minute), EventID: "h3"}
	missed := []events.WebhookMissed{{Application: "app", Repository: image, Version: "1.1.0", Digest: "sha256:1.1.0", Found: poll2.At,
		PushID: "p2", LastWebhook: at, LastWebhookVersion: "1.0.0"}}
	for _, step := range []struct {
		name   string
		push   cloudevents.Event
		missed []events.WebhookMissed
		seen   *rollout.Seen
		silent *rollout.Silence
	}{
		{name: "a webhook's push", push: push("h1", "1.0.0", "", 0), seen: &hook1},
		{name: "a poll's push of a version no webhook announced", push: push("p2", "1.1.0", events.SourcePoll, 5), missed: missed, seen: &poll2,
			silent: &rollout.Silence{Tag: "1.1.0", Digest: "sha256:1.1.0", Found: poll2.At, EventID: "p2", LastWebhook: &hook1}},
		{name: "redelivered: the same event again", push: push("p2", "1.1.0", events.SourcePoll, 5), missed: missed, seen: &poll2,
			silent: &rollout.Silence{Tag: "1.1.0", Digest: "sha256:1.1.0", Found: poll2.At, EventID: "p2", LastWebhook: &hook1}},
		{name: "a webhook's push ends it", push: push("h3", "1.2.0", "", 6), seen: &hook3},
	} {
		t.Run(step.name, func(t *testing.T) {
			evs, err := fn.Handle(ctx, step.push)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(step.missed, missedOf(evs)); diff != "" {
				t.Errorf("application.webhook.missed (-want +got)\n%s", diff)
			}
			st, err := repo.App(ctx, "app")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(step.seen, st.LastSeen); diff != "" {
				t.Errorf("LastSeen (-want +got)\n%s", diff)
			}
			if diff := cmp.Diff(step.silent, st.WebhookSilent); diff != "" {
				t.Errorf("WebhookSilent (-want +got)\n%s", diff)
			}
			if st.LatestTag != step.seen.Tag {
				t.Errorf("LatestTag = %s, want %s (in the same update)", st.LatestTag, step.seen.Tag)
			}
		})
	}
}
