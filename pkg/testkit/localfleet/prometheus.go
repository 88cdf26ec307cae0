package localfleet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// prometheusConfig scrapes every target a test registers (AddScrapeTarget)
// each second: file discovery notices a new target file at once.
const prometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: fleet
    honor_labels: true
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`

// startPrometheus runs the fleet's Prometheus, which every Flagger of the
// fleet queries (-metrics-server) for its analysis.
func (f *Fleet) startPrometheus(ctx context.Context, bins binaries, port int) error {
	dir := filepath.Join(f.Dir, "prometheus")
	if err := os.MkdirAll(filepath.Join(dir, "targets"), 0o755); err != nil {
		return fmt.Errorf("creating prometheus dir: %w", err)
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, prometheusConfig, filepath.Join(dir, "targets", "*.json")), 0o644); err != nil {
		return fmt.Errorf("writing prometheus config: %w", err)
	}
	f.PrometheusURL = "http://127.0.0.1:" + strconv.Itoa(port)
	args := []string{
		"--config.file=" + cfg,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--storage.tsdb.retention.time=6h",
		"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
		"--log.level=warn",
	}
	p, err := startProcess(ctx, f.Dir, "prometheus", bins.prometheus(), args, nil, f.DieWithParent)
	if err != nil {
		return err
	}
	if err := f.recordService(p); err != nil {
		return err
	}
	return waitFor(ctx, p, time.Minute, "prometheus ready", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, f.PrometheusURL+"/-/ready", ""), nil
	})
}

// AddScrapeTarget has the fleet's Prometheus scrape http://hostPort/metrics
// every second, under the label source=name; a second call with the same
// name replaces the target. The fleet must have been started with
// Options.Prometheus.
func (f *Fleet) AddScrapeTarget(name, hostPort string) error {
	if f.PrometheusURL == "" {
		return fmt.Errorf("the fleet runs no Prometheus (start it with Prometheus: true)")
	}
	b, err := json.Marshal([]map[string]any{{"targets": []string{hostPort}, "labels": map[string]string{"source": name}}})
	if err != nil {
		return err
	}
	dir := filepath.Join(f.Dir, "prometheus", "targets")
	// Written aside then renamed: Prometheus never reads half a file.
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("writing scrape target: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name+".json")); err != nil {
		return fmt.Errorf("writing scrape target: %w", err)
	}
	return nil
}

// RemoveScrapeTarget stops scraping the target AddScrapeTarget named.
func (f *Fleet) RemoveScrapeTarget(name string) error {
	err := os.Remove(filepath.Join(f.Dir, "prometheus", "targets", name+".json"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
