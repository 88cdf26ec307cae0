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
	// story is the feature simulate ran, as written (the set's
	// comparison reads the clusters it makes fail).
	story string
}

func (s *scenario) registerSimulateSteps(sc *godog.ScenarioContext) {
	r := &simulateRun{}
	s.registerSimulateSetSteps(sc, r)
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
	sc.Step("^`flotilla simulate` runs this story against the scenario's config, from the real push of \"([^\"]+)\":$",
		func(ctx context.Context, version string, doc *godog.DocString) error {
			pushed, err := s.pushEvent(ctx, version)
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "flotilla-simulate-honesty-*")
			if err != nil {
				return err
			}
			s.cleanups = append(s.cleanups, func() { _ = os.RemoveAll(dir) })
			r.feature = filepath.Join(dir, "honesty.feature")
			story := strings.ReplaceAll(doc.Content, "{push time}", pushed.Time().UTC().Format(time.RFC3339Nano))
			if err := os.WriteFile(r.feature, []byte(story), 0o600); err != nil {
				return err
			}
			start := time.Now()
			out, code, err := runFlotilla(ctx, "simulate", "--config", s.configPath(), "--format", "progress", r.feature)
			r.out, r.code, r.wall = out, code, time.Since(start)
			return err
		})
	sc.Step(`^simulate decided as the real fleet did for "([^"]+)": the waves started, each cluster's verdict, the rollback order(?: and|,) the outcome( and what released each wave)?$`,
		func(ctx context.Context, version, releases string) error {
			if r.code != 0 {
				return fmt.Errorf("simulate exited %d:\n%s", r.code, r.out)
			}
			id, err := s.rolloutID(ctx, version)
			if err != nil {
				return err
			}
			pushed, err := s.pushEvent(ctx, version)
			if err != nil {
				return err
			}
			waves, err := s.honestyWaves(ctx, id, pushed.Time())
			if err != nil {
				return err
			}
			onFleet := decide(happeningsOfEvents(s.w.sink.all(), id, pushed.Time(), waves), waves)
			simulated := decide(happeningsOfReport(r.out), waves)
			if releases == "" {
				onFleet.Released, simulated.Released = nil, nil
			}
			if onFleet.WavesStarted == 0 || onFleet.Outcome == "" || len(onFleet.Verdicts) == 0 {
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

// decisions are what a rollout decided, as the honesty scenarios compare
// them between the real fleet and simulate: how many waves it started, the
// first verdict on each cluster, the clusters it reverted in order, how it
// ended, and what released each wave after the first (Released).
type decisions struct {
	WavesStarted  int
	Verdicts      map[string]string // cluster -> succeeded | failed
	RollbackOrder []string
	Outcome       string
	Released      map[string]string // wave -> what its first cluster's apply followed
}

// happening is one thing a rollout did, as simulate's report words it,
// after the push.
type happening struct {
	at            time.Duration
	what          string // "wave started", "cluster applying", ...
	wave, cluster string
}

// honestyWave is a wave of the rollout compared: its name and clusters (as
// flotilla's API gives them), and what may hold it as the scenario's
// config says: the previous wave's bake, a freeze window's end (after the
// push; 0: none).
type honestyWave struct {
	name      string
	clusters  []string
	bake      time.Duration // this wave's own bake
	freezeEnd time.Duration
}

// honestyWaves reads rollout id's waves from flotilla's API and what holds
// them from the scenario's wave policies.
func (s *scenario) honestyWaves(ctx context.Context, id string, pushed time.Time) ([]honestyWave, error) {
	var ro struct {
		Waves []struct {
			Name     string
			Clusters []struct{ Name string }
		}
	}
	if err := s.getJSON(ctx, "/api/v1/rollouts/"+id, &ro); err != nil {
		return nil, err
	}
	var out []honestyWave
	for i, w := range ro.Waves {
		hw := honestyWave{name: w.Name}
		for _, c := range w.Clusters {
			hw.clusters = append(hw.clusters, c.Name)
		}
		p := s.w.wavePolicies[i]
		if b, ok := p["bakeTime"].(string); ok {
			d, err := time.ParseDuration(b)
			if err != nil {
				return nil, err
			}
			hw.bake = d
		}
		if fws, ok := p["freezeWindows"].([]map[string]any); ok {
			for _, fw := range fws {
				rule, _ := fw["rrule"].(string)
				dtstart, _, _ := strings.Cut(strings.TrimPrefix(rule, "DTSTART:"), "\n")
				from, err := time.Parse("20060102T150405Z", dtstart)
				if err != nil {
					return nil, fmt.Errorf("freeze window %v: %w", fw, err)
				}
				d, err := time.ParseDuration(fmt.Sprint(fw["duration"]))
				if err != nil {
					return nil, err
				}
				hw.freezeEnd = from.Add(d).Sub(pushed)
			}
		}
		out = append(out, hw)
	}
	return out, nil
}

// pushEvent is the journal's image.pushed of version (the real push).
func (s *scenario) pushEvent(ctx context.Context, version string) (cloudevents.Event, error) {
	return s.w.sink.waitFor(ctx, "the push of "+version, func(e cloudevents.Event) bool {
		if e.Type() != events.TypeImagePushed {
			return false
		}
		p, err := events.Decode[events.ImagePushed](e)
		return err == nil && p.Tag == version
	})
}

// released bounds how far apart in time a wave's start and what released
// it may be on the real fleet: a timer's firing and the launch that
// follows, on a loaded machine. The scenarios keep what may release a
// wave further apart than this.
const released = 10 * time.Second

// decide reads the decisions from what happened (in order). A wave's
// release is the first that fits, in this order: its approval (its last,
// at most released before its first cluster's apply), the end of a freeze
// window over it, the end of the previous wave's bake (after its last
// cluster's success), that success itself; else how long after it.
func decide(hs []happening, waves []honestyWave) decisions {
	d := decisions{Verdicts: map[string]string{}, Released: map[string]string{}}
	started := map[string]bool{}
	applied := map[string]time.Duration{}   // wave -> its first cluster's apply
	approved := map[string]time.Duration{}  // wave -> its last approval
	succeeded := map[string]time.Duration{} // cluster -> its first success
	for _, h := range hs {
		switch h.what {
		case "wave started":
			if !started[h.wave] {
				started[h.wave] = true
				d.WavesStarted++
			}
		case "cluster succeeded", "cluster failed":
			if d.Verdicts[h.cluster] == "" {
				d.Verdicts[h.cluster] = strings.TrimPrefix(h.what, "cluster ")
			}
			if _, ok := succeeded[h.cluster]; !ok && h.what == "cluster succeeded" {
				succeeded[h.cluster] = h.at
			}
		case "cluster applying":
			if _, ok := applied[h.wave]; !ok {
				applied[h.wave] = h.at
			}
		case "cluster reverting":
			if !slices.Contains(d.RollbackOrder, h.cluster) {
				d.RollbackOrder = append(d.RollbackOrder, h.cluster)
			}
		case "approved":
			if _, ok := applied[h.wave]; !ok {
				approved[h.wave] = h.at
			}
		case "rollout succeeded", "rollout rolled back", "rollback failed":
			if d.Outcome == "" {
				d.Outcome = h.what
			}
		}
	}
	near := func(a, b time.Duration) bool { return (a - b).Abs() <= released }
	for i := 1; i < len(waves); i++ {
		w, prev := waves[i], waves[i-1]
		start, ok := applied[w.name]
		if !ok {
			continue
		}
		var last time.Duration
		done := true
		for _, c := range prev.clusters {
			at, ok := succeeded[c]
			done = done && ok
			last = max(last, at)
		}
		a, approvedOK := approved[w.name]
		switch {
		case approvedOK && start >= a && start-a <= released:
			d.Released[w.name] = "its approval"
		case w.freezeEnd > 0 && near(start, w.freezeEnd):
			d.Released[w.name] = "the end of its freeze window"
		case done && prev.bake > 0 && near(start, last+prev.bake):
			d.Released[w.name] = "the end of " + prev.name + "'s bake"
		case done && near(start, last):
			d.Released[w.name] = prev.name + "'s success"
		case done:
			d.Released[w.name] = fmt.Sprintf("%s after %s's success", (start - last).Round(5*time.Second), prev.name)
		default:
			d.Released[w.name] = "a start before " + prev.name + " succeeded"
		}
	}
	return d
}

// eventLabels are the events compared, by the report's words.
var eventLabels = map[string]string{
	events.TypeWaveStarted:           "wave started",
	events.TypeClusterSucceeded:      "cluster succeeded",
	events.TypeClusterFailed:         "cluster failed",
	events.TypeWaveApprovalRequested: "approved",
	events.TypeRolloutSucceeded:      "rollout succeeded",
	events.TypeRolloutRolledBack:     "rollout rolled back",
	events.TypeRolloutRollbackFailed: "rollback failed",
}

// happeningsOfEvents reads what rollout id did from the journal's events
// (the sink's, in journal order), at their times after the push.
func happeningsOfEvents(evs []cloudevents.Event, id string, pushed time.Time, waves []honestyWave) []happening {
	var hs []happening
	for _, e := range evs {
		if events.RolloutID(e) != id {
			continue
		}
		what, ok := eventLabels[e.Type()]
		if e.Type() == events.TypePipelineRunRequested {
			p, err := events.Decode[events.PipelineRunRequested](e)
			if err != nil {
				continue
			}
			what, ok = "cluster applying", true
			if p.Purpose == events.PurposeRevert {
				what = "cluster reverting"
			}
		}
		if !ok {
			continue
		}
		var p struct {
			Wave    *int   `json:"wave"`
			Cluster string `json:"cluster"`
		}
		_ = e.DataAs(&p)
		h := happening{at: e.Time().Sub(pushed), what: what, cluster: p.Cluster}
		if p.Wave != nil && *p.Wave >= 0 && *p.Wave < len(waves) {
			h.wave = waves[*p.Wave].name
		}
		hs = append(hs, h)
	}
	return hs
}

// timelineLine is a line of simulate's timeline: +offset, day and time,
// what happened, its detail.
var timelineLine = regexp.MustCompile(`^\s+\+(\S+)\s+\w{3} \d\d:\d\d\s+(.+?)(?:\s{2,}(.*))?$`)

// happeningsOfReport reads what simulate's one rollout did from its
// report's timeline.
func happeningsOfReport(out string) []happening {
	var hs []happening
	for _, l := range strings.Split(out, "\n") {
		m := timelineLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at, err := time.ParseDuration(m[1])
		if err != nil {
			continue
		}
		h := happening{at: at, what: strings.TrimSpace(m[2])}
		// The detail starts wave=W cluster=C (when it has them), then the
		// tag and the reason, whose words may say anything.
		for _, kv := range strings.Fields(m[3]) {
			k, v, ok := strings.Cut(kv, "=")
			switch {
			case !ok || v == "":
			case k == "wave" && h.wave == "":
				h.wave = v
			case k == "cluster" && h.cluster == "":
				h.cluster = v
			}
		}
		hs = append(hs, h)
	}
	return hs
}
