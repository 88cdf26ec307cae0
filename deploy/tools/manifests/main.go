// Command manifests writes flotilla's kustomize base (deploy/manifests) from
// its Helm chart, the chart README's values table from values.yaml, and the
// chart's copy of the Grafana dashboard (a chart cannot read files outside
// itself) from deploy/grafana, so that none of them drifts: `make manifests` (and `go
// generate`, which `make verify` runs) call it; deploy/chart's tests fail
// when the committed base is not what the chart renders.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flotilla-cd/flotilla/deploy/chart"
	"github.com/flotilla-cd/flotilla/deploy/tools/internal/mdsection"
)

func main() {
	dir := flag.String("chart", "deploy/chart", "directory holding the chart (flotilla/)")
	out := flag.String("out", "deploy/manifests", "directory of the kustomize base to write")
	dashboard := flag.String("dashboard", "deploy/grafana/flotilla-dashboard.json", "the Grafana dashboard the chart ships")
	flag.Parse()
	if err := run(*dir, *out, *dashboard); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(dir, out, dashboard string) error {
	// First: the chart renders its copy.
	b, err := os.ReadFile(dashboard)
	if err != nil {
		return fmt.Errorf("reading the dashboard: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "flotilla", chart.DashboardFile), b, 0o644); err != nil {
		return fmt.Errorf("copying the dashboard into the chart: %w", err)
	}
	base, err := chart.Base(dir)
	if err != nil {
		return err
	}
	alerts, err := chart.Alerts(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"flotilla.yaml":       base,
		"kustomization.yaml":  []byte(chart.Kustomization),
		"namespace.yaml":      []byte(chart.Namespace),
		"prometheusrule.yaml": alerts,
	} {
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			return err
		}
	}
	values, err := os.ReadFile(filepath.Join(dir, "flotilla", "values.yaml"))
	if err != nil {
		return err
	}
	table, err := chart.ValuesTable(values)
	if err != nil {
		return err
	}
	return mdsection.Replace(filepath.Join(dir, "flotilla", "README.md"), "## Values", "## Values\n\n"+table+"\n", "")
}
