package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cucumber/godog"
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
	sc.Step(`^the simulate report shows cluster "([^"]+)" of wave "([^"]+)" on "([^"]+)"$`, func(cluster, wave, version string) error {
		row := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(wave) + `\s+` + regexp.QuoteMeta(cluster) + `\s+` + regexp.QuoteMeta(version) + `\s`)
		if !row.MatchString(r.out) {
			return fmt.Errorf("the waves x clusters table has no row %s %s %s:\n%s", wave, cluster, version, r.out)
		}
		return nil
	})
}
