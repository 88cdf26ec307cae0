package simulate

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/dispatch"
	"github.com/flotilla-cd/flotilla/pkg/rollout"
)

// DefaultStart is a scenario's virtual time unless it says `it is`: a
// Monday morning.
var DefaultStart = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Options are what `flotilla simulate` runs.
type Options struct {
	Config string   // the fleet config
	Paths  []string // feature files or directories
	// Format is godog's: pretty (the default), progress, cucumber, junit,
	// events; "junit:FILE" writes it to FILE (godog's syntax), several
	// separated by commas.
	Format string
	Tags   string    // godog's tag expression
	Output io.Writer // godog's output [os.Stdout]
	Report io.Writer // the scenarios' timelines and tables [os.Stderr]; nil: none
}

// Run runs the features and returns godog's status: 0 when every scenario
// passed, else 1 (2 for unusable options).
func Run(ctx context.Context, o Options) (int, error) {
	if o.Output == nil {
		o.Output = os.Stdout
	}
	// The config must load before any scenario runs.
	tmp, err := os.MkdirTemp("", "flotilla-simulate-")
	if err != nil {
		return 2, err
	}
	defer os.RemoveAll(tmp)
	_, sg, err := loadConfig(o.Config, tmp, nil)
	if err != nil {
		return 2, err
	}
	sg.close()
	suite := godog.TestSuite{
		Name: "simulate",
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			s := &scenario{opts: o}
			sc.Before(func(c context.Context, _ *godog.Scenario) (context.Context, error) {
				s.reset(c)
				return c, nil
			})
			sc.After(func(c context.Context, g *godog.Scenario, err error) (context.Context, error) {
				return c, s.finish(g, err)
			})
			s.register(sc)
		},
		Options: &godog.Options{
			Format: o.Format, Paths: o.Paths, Tags: o.Tags, Output: o.Output, NoColors: true,
			// Not strict: the last step matches every text (an unknown step
			// fails naming the closest known ones), and strict would call
			// every step ambiguous.
			Concurrency: 1, DefaultContext: ctx,
		},
	}
	return suite.Run(), nil
}

// scenario is one scenario's world.
type scenario struct {
	opts    Options
	ctx     context.Context
	cfg     *config.Config
	en      *engine
	startAt time.Time
	initial string
	// initialOf is what an application runs before the push, when the
	// scenario said so of it (fleetRunsOf); else initial.
	initialOf      map[string]string
	edits          []func(map[string]any) error
	outcomes       map[string]Outcome
	unreachableSet []string
	analysis       time.Duration
	pushedAt       time.Time
	pushes         int
	// app is the application the scenario pushed last (application).
	app      string
	controls int
	wall     time.Time
	// groups are the people's groups the scenario gave (inGroup).
	groups map[string][]string
	// signing is how the scenario's versions are signed, by version
	// (signatures.go's modes; a version it says nothing of: signedByDefault).
	signing map[string]string
	// signers stand in for the config's signers (nil: none).
	signers *signers
}

func (s *scenario) reset(ctx context.Context) {
	*s = scenario{opts: s.opts, ctx: ctx, startAt: DefaultStart, outcomes: map[string]Outcome{}, signing: map[string]string{}, wall: time.Now()}
}

// ensure starts the engine at the first step that needs it.
func (s *scenario) ensure() error {
	if s.en != nil {
		return nil
	}
	dir, err := os.MkdirTemp("", "flotilla-simulate-")
	if err != nil {
		return err
	}
	cfg, sg, err := loadConfig(s.opts.Config, dir, func(doc map[string]any) error {
		for _, edit := range s.edits {
			if err := edit(doc); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	s.signers.close() // an earlier attempt's
	s.signers = sg
	if len(cfg.Applications) == 0 {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("config %s has no application", s.opts.Config)
	}
	s.cfg = cfg
	clock := dispatch.NewManualClock(s.startAt)
	fleet := newFleet(cfg, clock)
	if sg != nil {
		sg.serve()
		fleet.signers = sg
	}
	fleet.outcomes = s.outcomes
	fleet.analysis = s.analysis
	fleet.mu.Lock()
	for _, a := range cfg.Applications {
		if v := s.initialVersion(a.Name); v != "" {
			fleet.runs(a, v)
		}
	}
	fleet.mu.Unlock()
	en, err := startEngine(s.ctx, cfg, dir, clock, fleet)
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	s.en = en
	if err := s.deploySets(); err != nil {
		return err
	}
	if err := s.applyUnreachable(); err != nil {
		return err
	}
	return en.settle(s.ctx)
}

// deploySets records what the fleet runs of each release set whose
// version is a tuple (of image members, or of git and image members) as
// the set's deployed version, as the rollout that put it there would
// have: each member the scenario said runs a version, at that version
// (the fleet model's image, or a git member's commit), in the set's
// order. A push of a member then moves from it (rollout.DecideSetPush,
// DecideSetCommit): the others stay at what the fleet runs, a tag not
// newer than the member's is skipped, and so is the deployed commit.
func (s *scenario) deploySets() error {
	for _, a := range s.cfg.Applications {
		if !rollout.TupleSet(a) {
			continue
		}
		v := s.setRuns(a)
		if len(v) == 0 {
			continue
		}
		if err := s.en.srv.Rollouts().UpdateApp(s.ctx, a.Name, func(st *rollout.AppState) error {
			st.DeployedTag, st.DeployedDigest, st.DeployedVersions = v.Tag(), v.Digest(), v
			return nil
		}); err != nil {
			return fmt.Errorf("recording what release set %s runs: %w", a.Name, err)
		}
	}
	return nil
}

// setRuns is the version of tuple set set the scenario's fleet runs: each
// member's the scenario gave, as the fleet model resolved it; a git
// member's entry as plan makes it of a push of that commit (the
// repository as verify displays it, branch@abbrev, the commit).
func (s *scenario) setRuns(set config.Application) rollout.SetVersion {
	f := s.en.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	var v rollout.SetVersion
	for _, name := range set.Set.Names() {
		m, ok := s.cfg.Application(name)
		tag := s.initialVersion(name)
		switch {
		case !ok || tag == "":
		case m.Git() != nil:
			g := m.Git()
			commit := Commit(g.URL, tag)
			f.versions[commit] = tag
			gv := events.GitVerified{Branch: g.Branch, Abbrev: commit[:12], Commit: commit}
			v = append(v, rollout.MemberVersion{Application: name, Image: config.DisplayURL(g.URL), Tag: gv.Version(), Digest: commit})
		case m.Image != "":
			v = append(v, rollout.MemberVersion{Application: name, Image: m.Image, Tag: tag, Digest: f.resolved(m.Image, tag), Created: f.tags[m.Image][tag]})
		}
	}
	return v
}

func (s *scenario) applyUnreachable() error {
	s.en.fleet.mu.Lock()
	defer s.en.fleet.mu.Unlock()
	for _, name := range s.unreachableSet {
		c, ok := s.en.fleet.clusters[name]
		if !ok {
			return fmt.Errorf("no cluster %q in the config", name)
		}
		c.unreachable = true
	}
	return nil
}

// finish writes the scenario's report and stops its engine.
func (s *scenario) finish(g *godog.Scenario, err error) error {
	defer s.signers.close()
	if s.en == nil {
		return nil
	}
	if s.opts.Report != nil {
		s.report(s.opts.Report, g.Name, err)
	}
	return s.en.stop()
}
