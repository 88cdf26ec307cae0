package main

import (
	"os"
	"path/filepath"
	"strings"
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

// make bench-large rewrites its own dated section and nothing else: an
// earlier run's section (another date) is replaced, or the section goes
// before "## Reproduce" the first time.
func TestReplaceSection(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{
			name: "replaces an earlier date",
			doc:  "# B\n\n## Reaction\n\nA\n\n## Large (2026-11-29, interim)\n\nold\nrows\n\n## Image\n\nI\n\n## Reproduce\n\nR\n",
			want: "# B\n\n## Reaction\n\nA\n\n## Large (2026-12-02)\n\nnew\n\n## Image\n\nI\n\n## Reproduce\n\nR\n",
		},
		{
			name: "first time: before Reproduce",
			doc:  "# B\n\n## Reaction\n\nA\n\n## Reproduce\n\nR\n",
			want: "# B\n\n## Reaction\n\nA\n\n## Large (2026-12-02)\n\nnew\n\n## Reproduce\n\nR\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replaceSection(tc.doc, "## Large (", "## Large (2026-12-02)\n\nnew\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("replaceSection (-want +got):\n%s", diff)
			}
		})
	}
	report := "# Benchmarks\n\n## Reaction latency on a real local fleet\n\nTargets\n\n| t |\n\n### What is real and what is simulated\n\nReal\n"
	if diff := cmp.Diff("Targets\n\n| t |\n", reactionTables(report)); diff != "" {
		t.Errorf("reactionTables (-want +got):\n%s", diff)
	}
}

// make bench's what-if rows: BenchmarkSimulate1000Clusters5Waves's output
// (-count 3, its peak-RSS-MiB metric) read into the median row of its
// section. Catches a parser that drops the custom metric (the peak RSS
// column would read 0) or takes the first run for the median.
func TestWhatifSection(t *testing.T) {
	out := filepath.Join(t.TempDir(), "whatif.txt")
	raw := `goos: linux
pkg: github.com/flotilla-cd/flotilla/pkg/simulate
BenchmarkSimulate1000Clusters5Waves-2   	       1	52400000000 ns/op	       196.0 peak-RSS-MiB
BenchmarkSimulate1000Clusters5Waves-2   	       1	30100000000 ns/op	       201.5 peak-RSS-MiB
BenchmarkSimulate1000Clusters5Waves-2   	       1	31000000000 ns/op	       199.0 peak-RSS-MiB
PASS
`
	if err := os.WriteFile(out, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := parseStoreBench(out)
	if err != nil {
		t.Fatal(err)
	}
	row := "| BenchmarkSimulate1000Clusters5Waves-2 | 3 | 31.0 | 199 |\n"
	if s := whatifSection(got); !strings.Contains(s, row) || !strings.HasPrefix(s, "\n## What-if: 1,000 clusters in five waves\n") {
		t.Errorf("whatifSection has no row %q:\n%s", row, s)
	}
}
