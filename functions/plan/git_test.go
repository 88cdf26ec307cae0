package plan_test

import (
	"context"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/functions/internal/functiontest"
	"github.com/flotilla-cd/flotilla/functions/plan"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

func gitVerified(t *testing.T, id, commit string, clusters []string) cloudevents.Event {
	t.Helper()
	v := events.GitVerified{RepoURL: "https://git.test/deploy.git", Ref: "refs/heads/main", Branch: "main",
		Commit: commit, Abbrev: commit[:12], Applications: []string{"web"}}
	if clusters != nil {
		v.Clusters = map[string][]string{"web": clusters}
	}
	e, err := events.New(id, events.Source, events.TypeGitVerified, v)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// outcome is what plan did with one push: "started <version> <waves>",
// "superseded <rollout>" or "skipped: <reason>".
func outcome(t *testing.T, evs []cloudevents.Event) []string {
	t.Helper()
	var out []string
	for _, s := range functiontest.Summarize(t, evs, events.TypeRolloutStarted, events.TypeWaveStarted, events.TypeRolloutSkipped, events.TypeRolloutSuperseded) {
		switch d := s.Data.(type) {
		case events.RolloutStarted:
			var ws []string
			for _, w := range d.Waves {
				ws = append(ws, strings.Join(w, ","))
			}
			out = append(out, "started "+d.Tag+" @"+d.Image+" "+strings.Join(ws, " then "))
		case events.RolloutResult:
			out = append(out, "superseded "+d.RolloutID)
		case events.RolloutSkipped:
			out = append(out, "skipped: "+d.Reason)
		}
	}
	return out
}

// A git application's commit rolls out to the clusters whose paths it
// changed, taking along those of the rollout it supersedes; the commit in
// flight or deployed is skipped; the repository is recorded without its
// credentials.
func TestPlanGitCommits(t *testing.T) {
	app := config.Application{Name: "web", Namespace: "default", OnNewVersion: config.OnNewVersionSupersede,
		Workload: config.Workload{Kind: "Deployment", Name: "web"},
		Source:   &config.Source{Git: &config.GitSource{URL: "https://flotilla:s3cret@git.test/deploy.git", Branch: "main", Paths: []string{"clusters/{cluster}"}}}}
	repo := functiontest.NewRepo(t)
	f := plan.New(newConfig(app), repo, nil)
	ctx := context.Background()
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	steps := []struct {
		name  string
		event cloudevents.Event
		want  []string
	}{
		{"a change to c2's paths goes to c2", gitVerified(t, "p1", a, []string{"c2"}),
			[]string{"started main@aaaaaaaaaaaa @https://git.test/deploy.git c2"}},
		{"the same commit pushed again (another delivery) is skipped", gitVerified(t, "p2", a, []string{"c2"}),
			[]string{"skipped: commit " + a + " (main@aaaaaaaaaaaa) is being rolled out (rollout " + plan.ID("p1", "web") + ")"}},
		{"a change to c1 supersedes it, and takes c2 along", gitVerified(t, "p3", b, []string{"c1"}),
			[]string{"superseded " + plan.ID("p1", "web"), "started main@bbbbbbbbbbbb @https://git.test/deploy.git c1 then c2"}},
		{"a tag (no cluster list) goes to every cluster", gitVerified(t, "p4", c, nil),
			[]string{"superseded " + plan.ID("p3", "web"), "started main@cccccccccccc @https://git.test/deploy.git c1 then c2,c3"}},
	}
	for _, s := range steps {
		evs, err := f.Handle(ctx, s.event)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, outcome(t, decisions(evs))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
	if err := repo.UpdateApp(ctx, "web", func(st *rollout.AppState) error {
		st.DeployedTag, st.DeployedDigest = "main@cccccccccccc", c
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Handle(ctx, gitVerified(t, "p5", c, []string{"c1"}))
	if err != nil {
		t.Fatal(err)
	}
	// Still in flight too: the deployed commit is named first.
	if diff := cmp.Diff([]string{"skipped: commit " + c + " (main@cccccccccccc) is deployed already"}, outcome(t, evs)); diff != "" {
		t.Errorf("the deployed commit (-want +got):\n%s", diff)
	}
}
