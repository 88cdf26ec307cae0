package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cucumber/godog"
)

// timings records how long each scenario and each of its steps took, so a
// run says where the features' time goes (TestFeatures logs the slowest).
var timings = &stepTimings{}

type stepTimings struct {
	mu        sync.Mutex
	scenarios []timed
	steps     []timed
}

// timed is one scenario or step: what it was and how long it took.
type timed struct {
	name string
	took time.Duration
}

// record times sc's scenario and its steps.
func (t *stepTimings) record(sc *godog.ScenarioContext) {
	var name string
	var began, stepBegan time.Time
	sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
		name, began = s.Name, time.Now()
		return ctx, nil
	})
	sc.StepContext().Before(func(ctx context.Context, _ *godog.Step) (context.Context, error) {
		stepBegan = time.Now()
		return ctx, nil
	})
	sc.StepContext().After(func(ctx context.Context, st *godog.Step, _ godog.StepResultStatus, _ error) (context.Context, error) {
		t.add(&t.steps, timed{name: fmt.Sprintf("%s | %s", short(name), st.Text), took: time.Since(stepBegan)})
		return ctx, nil
	})
	sc.After(func(ctx context.Context, _ *godog.Scenario, _ error) (context.Context, error) {
		t.add(&t.scenarios, timed{name: name, took: time.Since(began)})
		return ctx, nil
	})
}

func (t *stepTimings) add(to *[]timed, x timed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	*to = append(*to, x)
}

// report logs the n slowest scenarios and steps, and the scenarios' sum.
func (t *stepTimings) report(tb testing.TB, n int) {
	tb.Helper()
	t.mu.Lock()
	defer t.mu.Unlock()
	var sum time.Duration
	for _, s := range t.scenarios {
		sum += s.took
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d scenarios took %s in all (they run side by side); the slowest:\n", len(t.scenarios), sum.Round(time.Second))
	for _, s := range slowest(t.scenarios, n) {
		fmt.Fprintf(&b, "  %6.1fs  %s\n", s.took.Seconds(), s.name)
	}
	fmt.Fprintf(&b, "the slowest steps:\n")
	for _, s := range slowest(t.steps, n) {
		fmt.Fprintf(&b, "  %6.1fs  %s\n", s.took.Seconds(), s.name)
	}
	tb.Log(b.String())
	// make test shows no log of a test that passed: the report is kept in
	// the cache too.
	if dir := os.Getenv("FLOTILLA_CACHE"); dir != "" {
		path := filepath.Join(dir, "features-timings.txt")
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err == nil {
			fmt.Fprintf(os.Stderr, "features: where the time went is in %s\n", path)
		}
	}
}

func slowest(xs []timed, n int) []timed {
	xs = slices.Clone(xs)
	slices.SortFunc(xs, func(a, b timed) int { return int(b.took - a.took) })
	return xs[:min(n, len(xs))]
}

func short(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	return s
}
