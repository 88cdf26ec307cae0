package plan_test

import (
	"strings"
	"testing"

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
