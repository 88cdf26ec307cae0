package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flotilla-cd/flotilla/pkg/config"
	"github.com/flotilla-cd/flotilla/pkg/discovery"
	"github.com/flotilla-cd/flotilla/pkg/reload"
)

// follow runs a Source over one inventory as flotilla serve does, until
// ctx ends: a config file whose fleet has c1 (kubeconfig, tier canary),
// the discovery given (its flow-style YAML) and waves canary and prod by
// tier, swapped in through pkg/reload. inventory makes the inventory of
// the loaded config. It returns the configuration in force and the
// registry of the discovery's metrics.
func follow(ctx context.Context, t *testing.T, kubeconfig, discoveryYAML string, inventory func(*config.Config) (discovery.Inventory, error)) (*config.Live, *prometheus.Registry) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flotilla.yaml")
	if err := os.WriteFile(path, []byte(`
receivers: [{name: canaries, type: flagger, insecure: true}]
fleet:
  clusters: [{name: c1, kubeconfig: `+kubeconfig+`, labels: {tier: canary}}]
  discovery: `+discoveryYAML+`
  waves:
    - {name: canary, selector: {matchLabels: {tier: canary}}}
    - {name: prod, selector: {matchLabels: {tier: prod}}}
applications:
  - {name: podinfo, image: registry.example.com/demo/podinfo, workload: {name: podinfo}, service: {port: 9898}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	live := config.NewLive(first)
	r, err := reload.New(live, reload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	metrics, err := discovery.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory(first)
	if err != nil {
		t.Fatal(err)
	}
	var src *discovery.Source
	src, err = discovery.New(discovery.Options{Inventories: []discovery.Inventory{inv}, Retry: time.Second, Metrics: metrics,
		Build: func() (*config.Config, error) {
			cfg, _, err := config.LoadExtra(path, config.Extra{Clusters: src.Clusters()})
			return cfg, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	go func() { _ = src.Run(ctx, r) }()
	return live, reg
}

// waitWaves waits until the configuration in force has these waves (the
// clusters of each, by name), or fails at ctx's end.
func waitWaves(ctx context.Context, t *testing.T, live *config.Live, want map[string][]string) {
	t.Helper()
	var got map[string][]string
	for {
		got = map[string][]string{}
		for _, w := range live.Current().Fleet.Waves {
			got[w.Name] = slices.Clone(w.ClusterNames())
		}
		if cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waves (-want +got):\n%s", cmp.Diff(want, got, cmpopts.EquateEmpty()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}
