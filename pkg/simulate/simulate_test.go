package simulate

import (
	"bytes"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRunLastWaveFails(t *testing.T) {
	var out, report bytes.Buffer
	start := time.Now()
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "lastwave.feature")},
		Format: "progress", Output: &out, Report: &report,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wall %s\n%s\n%s", time.Since(start), out.String(), report.String())
	// The second scenario fails: its step is unknown.
	if status != 1 {
		t.Fatalf("status %d, want 1 (the unknown step)", status)
	}
	for _, want := range []string{"rollback order: c2, c3, c1", `unknown step "the moon is full"`, "2 scenarios (1 passed, 1 failed)"} {
		if !strings.Contains(out.String()+report.String(), want) {
			t.Errorf("the output says nothing of %q", want)
		}
	}
}

// An unknown step fails naming it and the closest known steps. Catches a
// library that lets godog call it undefined (a pending step passes
// unless strict) or names no suggestion.
func TestUnknownStepSuggests(t *testing.T) {
	s := &scenario{}
	err := s.unknown(`"1.2.0" is pushd`)
	if err == nil || !strings.Contains(err.Error(), `unknown step "\"1.2.0\" is pushd"`) ||
		!strings.Contains(err.Error(), `When "1.2.0" is pushed`) {
		t.Errorf("unknown = %v", err)
	}
}

// The documented examples (docs/simulate/whatif.feature) pass against
// config/example.yaml: a freeze window, an approval, an unreachable
// cluster, a version that hangs.
func TestDocumentedExamples(t *testing.T) {
	var out bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("..", "..", "docs", "simulate", "whatif.feature")},
		Format: "progress", Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	if status != 0 {
		t.Fatalf("status %d:\n%s", status, out.String())
	}
}

// The simulation holds approvals to the API's rule (pkg/rollout's
// ApprovalRefused): automation ("default", server.apiToken), the pusher
// under separation of duties and those approvals.from does not name are
// refused, and an approval the API refuses fails its step. Catches an
// approval step that journals the approval whoever gives it (the first
// scenario's refusals would pass as approvals and the second would
// succeed).
func TestApproversArePeople(t *testing.T) {
	var out bytes.Buffer
	status, err := Run(t.Context(), Options{
		Config: filepath.Join("..", "..", "config", "example.yaml"),
		Paths:  []string{filepath.Join("testdata", "approvers.feature")},
		Format: "progress", Output: &out,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 scenarios (1 passed, 1 failed)",
		"the API refuses default's approval of wave prod (403): default is automation and never counts as an approver"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output says nothing of %q:\n%s", want, out.String())
		}
	}
	if status != 1 {
		t.Errorf("status %d, want 1 (the refused approval)", status)
	}
}

// The same scenarios give the same report every run, wall time aside: the
// same events at the same virtual instants, the same rollback order and
// table. Catches an idleness guessed from quiet and a simulated Flagger
// acting while the engine works (on a loaded machine a rollout ended
// 2h1m0s after the push instead of 2h0m40s: the canary's status read
// raced the Flagger's step).
func TestReportIsTheSameEveryRun(t *testing.T) {
	const runs = 3
	tests := []struct {
		name  string
		paths []string
	}{
		{"the last wave fails", []string{filepath.Join("testdata", "lastwave.feature")}},
		{"the documented examples", []string{filepath.Join("..", "..", "docs", "simulate", "whatif.feature")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var first string
			for i := range runs {
				var out, report bytes.Buffer
				if _, err := Run(t.Context(), Options{
					Config: filepath.Join("..", "..", "config", "example.yaml"),
					Paths:  tc.paths, Format: "progress", Output: &out, Report: &report,
				}); err != nil {
					t.Fatal(err)
				}
				got := sameRun(report.String())
				if i == 0 {
					first = got
					continue
				}
				if diff := cmp.Diff(first, got); diff != "" {
					t.Fatalf("run %d differs from the first (-first +run):\n%s", i+1, diff)
				}
			}
		})
	}
}

// wallTime is the report's wall time, the one part that may differ.
var wallTime = regexp.MustCompile(`, wall [0-9.]+[a-zµ]+\)`)

// sameRun is a report as two runs of the same scenario must agree on: its
// lines without the wall time, sorted (events of one virtual instant from
// runs in parallel come in either order).
func sameRun(report string) string {
	lines := strings.Split(wallTime.ReplaceAllString(report, ")"), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
