package simulate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkSimulate1000Clusters5Waves simulates issue #36's measure: a
// rollout through 1,000 clusters in five waves (10, 40, 150, 300, 500)
// whose fourth wave fails, rolled back everywhere. It reports the
// process's peak resident memory (VmHWM) besides the time per run.
func BenchmarkSimulate1000Clusters5Waves(b *testing.B) {
	dir := b.TempDir()
	sizes := []int{10, 40, 150, 300, 500}
	var cfg strings.Builder
	cfg.WriteString(`receivers:
  - {name: registry, type: distribution, secret: {env: SIM_BENCH_TOKEN}}
  - {name: flagger, type: flagger, secret: {env: SIM_BENCH_TOKEN}}
fleet:
  clusters:
`)
	n := 0
	for w, size := range sizes {
		for range size {
			n++
			fmt.Fprintf(&cfg, "    - {name: c%04d, kubeconfig: /nonexistent/kubeconfig, labels: {wave: w%d}}\n", n, w+1)
		}
	}
	cfg.WriteString("  wavePolicy: {maxParallel: 100%, requireSignature: false}\n  waves:\n")
	for w := range sizes {
		fmt.Fprintf(&cfg, "    - {name: w%d, selector: {matchLabels: {wave: w%d}}}\n", w+1, w+1)
	}
	cfg.WriteString(`applications:
  - name: podinfo
    image: registry.test/demo/podinfo
    namespace: demo
    workload: {name: podinfo}
    service: {port: 9898}
    delivery: {strategy: blueGreen, interval: 1m, iterations: 5}
`)
	config := filepath.Join(dir, "fleet.yaml")
	feature := filepath.Join(dir, "large.feature")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(feature, []byte(`Feature: 1,000 clusters
  Scenario: 1.2.0 fails in the fourth wave
    Given the fleet runs "1.1.0"
    And "1.2.0" fails in wave "w4"
    When "1.2.0" is pushed
    And the rollout runs until it ends
    Then the rollout is RolledBack
    And every cluster runs "1.1.0"
`), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		var out bytes.Buffer
		status, err := Run(b.Context(), Options{Config: config, Paths: []string{feature}, Format: "progress", Output: &out})
		if err != nil || status != 0 {
			b.Fatalf("status %d, %v\n%s", status, err, out.String())
		}
	}
	if hwm, ok := peakRSS(); ok {
		b.ReportMetric(hwm, "peak-RSS-MiB")
	}
}

// peakRSS is the process's peak resident memory in MiB (Linux).
func peakRSS() (float64, bool) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err == nil
		}
	}
	return 0, false
}
