package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cucumber/godog"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/events"
)

// simulateRun is one scenario's run of `flotilla simulate`.
type simulateRun struct {
	dir     string
	feature string
	out     string
	code    int
	wall    time.Duration
}

func (s *scenario) registerSimulateSteps(sc *godog.ScenarioContext) {
	r := &simulateRun{}
	sc.Step("^a user's feature \"([^\"]+)\":$", func(name string, doc *godog.DocString) error {
		dir, err := os.MkdirTemp("", "flotilla-simulate-feature-*")
		if err != nil {
			return err
		}
		s.cleanups = append(s.cleanups, func() { _ = os.RemoveAll(dir) })
		r.dir, r.feature = dir, filepath.Join(dir, name)
		return os.WriteFile(r.feature, []byte(doc.Content), 0o600)
	})
	sc.Step("^`flotilla simulate` runs it against config/example.yaml$", func(ctx context.Context) error {
		start := time.Now()
		out, code, err := runFlotilla(ctx, "simulate", "--config", filepath.Join("..", "config", "example.yaml"), "--format", "progress", r.feature)
		r.out, r.code, r.wall = out, code, time.Since(start)
		return err
	})
	sc.Step(`^simulate passed in under (\d+) seconds of wall time$`, func(n int) error {
		if r.code != 0 {
			return fmt.Errorf("simulate exited %d:\n%s", r.code, r.out)
		}
		if r.wall >= time.Duration(n)*time.Second {
			return fmt.Errorf("simulate took %s of wall time, not under %ds:\n%s", r.wall, n, r.out)
		}
		return nil
	})
	sc.Step(`^simulate failed$`, func() error {
		if r.code != 1 {
			return fmt.Errorf("simulate exited %d, want 1 (a scenario failed):\n%s", r.code, r.out)
		}
		return nil
	})
	sc.Step(`^the simulate report says "((?:[^"\\]|\\.)*)"$`, func(want string) error {
		want = strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(want)
		if !strings.Contains(r.out, want) {
			return fmt.Errorf("simulate's output says nothing of %q:\n%s", want, r.out)
		}
		return nil
	})
	sc.Step("^`flotilla simulate` runs the same story against the scenario's config: \"([^\"]+)\" failing in cluster \"([^\"]+)\" on a fleet running \"([^\"]+)\"$",
		func(ctx context.Context, version, cluster, before string) error {
			dir, err := os.MkdirTemp("", "flotilla-simulate-honesty-*")
			if err != nil {
				return err
			}
			s.cleanups = append(s.cleanups, func() { _ = os.RemoveAll(dir) })
			r.feature = filepath.Join(dir, "honesty.feature")
			story := fmt.Sprintf(`Feature: the real fleet's story
  Scenario: %[1]s fails in %[2]s
    Given the fleet runs "%[3]s"
    And "%[1]s" fails in cluster "%[2]s"
    When "%[1]s" is pushed
    And the rollout runs until it ends
`, version, cluster, before)
			if err := os.WriteFile(r.feature, []byte(story), 0o600); err != nil {
				return err
			}
			start := time.Now()
			out, code, err := runFlotilla(ctx, "simulate", "--config", s.configPath(), "--format", "progress", r.feature)
			r.out, r.code, r.wall = out, code, time.Since(start)
			return err
		})
	sc.Step(`^simulate decided as the real fleet did for "([^"]+)": the waves started, each cluster's verdict, the rollback order and the outcome$`,
		func(ctx context.Context, version string) error {
			if r.code != 0 {
				return fmt.Errorf("simulate exited %d:\n%s", r.code, r.out)
			}
			id, err := s.rolloutID(ctx, version)
			if err != nil {
				return err
			}
			onFleet := decisionsOfEvents(s.w.sink.all(), id)
			simulated := decisionsOfReport(r.out)
			if onFleet.WavesStarted == 0 || onFleet.Outcome == "" || len(onFleet.RollbackOrder) == 0 {
				return fmt.Errorf("the real fleet's rollout of %s shows too little to compare: %+v", version, onFleet)
			}
			if diff := cmp.Diff(onFleet, simulated); diff != "" {
				return fmt.Errorf("simulate decided otherwise than the real fleet (-real +simulate):\n%s\nsimulate's report:\n%s", diff, r.out)
			}
			return nil
		})
	sc.Step(`^the simulate report shows cluster "([^"]+)" of wave "([^"]+)" on "([^"]+)"$`, func(cluster, wave, version string) error {
		row := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(wave) + `\s+` + regexp.QuoteMeta(cluster) + `\s+` + regexp.QuoteMeta(version) + `\s`)
		if !row.MatchString(r.out) {
			return fmt.Errorf("the waves x clusters table has no row %s %s %s:\n%s", wave, cluster, version, r.out)
		}
		return nil
	})
}

// decisions are what a rollout decided, as the honesty scenario compares
// them between the real fleet and simulate: how many waves it started, the
// first verdict on each cluster, the clusters it reverted in order, and
// how it ended.
type decisions struct {
	WavesStarted  int
	Verdicts      map[string]string // cluster -> succeeded | failed
	RollbackOrder []string
	Outcome       string
}

// outcomes are the events that end a rollout, by the report's words.
var endLabels = map[string]string{
	events.TypeRolloutSucceeded:      "rollout succeeded",
	events.TypeRolloutRolledBack:     "rollout rolled back",
	events.TypeRolloutRollbackFailed: "rollback failed",
}

// decisionsOfEvents reads rollout id's decisions from the journal's events
// (the sink's, in journal order).
func decisionsOfEvents(evs []cloudevents.Event, id string) decisions {
	d := decisions{Verdicts: map[string]string{}}
	waves := map[int]bool{}
	for _, e := range evs {
		if events.RolloutID(e) != id {
			continue
		}
		switch e.Type() {
		case events.TypeWaveStarted:
			if p, err := events.Decode[events.WaveStarted](e); err == nil && !waves[p.Wave] {
				waves[p.Wave] = true
				d.WavesStarted++
			}
		case events.TypeClusterSucceeded, events.TypeClusterFailed:
			verdict := "succeeded"
			if e.Type() == events.TypeClusterFailed {
				verdict = "failed"
			}
			if p, err := events.Decode[events.ClusterResult](e); err == nil && d.Verdicts[p.Cluster] == "" {
				d.Verdicts[p.Cluster] = verdict
			}
		case events.TypePipelineRunRequested:
			if p, err := events.Decode[events.PipelineRunRequested](e); err == nil && p.Purpose == events.PurposeRevert && !slices.Contains(d.RollbackOrder, p.Cluster) {
				d.RollbackOrder = append(d.RollbackOrder, p.Cluster)
			}
		default:
			if o, ok := endLabels[e.Type()]; ok && d.Outcome == "" {
				d.Outcome = o
			}
		}
	}
	return d
}

// timelineLine is a line of simulate's timeline: +offset, day and time,
// what happened, its detail.
var timelineLine = regexp.MustCompile(`^\s+\+\S+\s+\w{3} \d\d:\d\d\s+(.+?)(?:\s{2,}(.*))?$`)

// decisionsOfReport reads the decisions of simulate's one rollout from its
// report (its timeline and rollback order).
func decisionsOfReport(out string) decisions {
	d := decisions{Verdicts: map[string]string{}}
	for _, l := range strings.Split(out, "\n") {
		if order, ok := strings.CutPrefix(l, "rollback order: "); ok {
			d.RollbackOrder = strings.Split(strings.TrimSpace(order), ", ")
			continue
		}
		m := timelineLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		what, detail := strings.TrimSpace(m[1]), m[2]
		cluster := ""
		if _, rest, ok := strings.Cut(detail, "cluster="); ok {
			cluster, _, _ = strings.Cut(rest, " ")
		}
		switch {
		case what == "wave started":
			d.WavesStarted++
		case what == "cluster succeeded" || what == "cluster failed":
			if d.Verdicts[cluster] == "" {
				d.Verdicts[cluster] = strings.TrimPrefix(what, "cluster ")
			}
		case slices.Contains([]string{"rollout succeeded", "rollout rolled back", "rollback failed"}, what) && d.Outcome == "":
			d.Outcome = what
		}
	}
	return d
}
