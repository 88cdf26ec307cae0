package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Dated sections, measured apart from make bench, survive a new report;
// undated ones are the report's own and are replaced.
func TestKeepDated(t *testing.T) {
	old := "# Benchmarks\n\n## Reaction\n\nold A\n\n## One hop fewer (2026-11-27, interim)\n\nbefore/after\n\n## Image\n\nold image\n\n## Links (2026-11-28)\n\ncounts\n## Reproduce\n\nR\n"
	report := "# Benchmarks\n\n## Reaction\n\nnew A\n\n## Reproduce\n\nR\n"
	want := "# Benchmarks\n\n## Reaction\n\nnew A\n\n## One hop fewer (2026-11-27, interim)\n\nbefore/after\n\n## Links (2026-11-28)\n\ncounts\n\n## Reproduce\n\nR\n"
	if diff := cmp.Diff(want, keepDated(report, old)); diff != "" {
		t.Errorf("keepDated (-want +got):\n%s", diff)
	}
	if got := keepDated(report, report); got != report {
		t.Errorf("a report without dated sections changed: %q", got)
	}
}
