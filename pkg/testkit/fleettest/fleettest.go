package fleettest

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Options says what the tests need of the fleet.
type Options struct {
	// Clusters is the minimum number of clusters.
	Clusters int
	// Tekton requires Tekton Pipelines in every cluster.
	Tekton bool
	// StockFlagger names clusters that must run the stock Flagger build.
	StockFlagger []string
	// MeshProviders are the clusters' Flagger -mesh-provider (default
	// kubernetes).
	MeshProviders map[string]string
	// Prometheus requires the fleet's Prometheus, which Flagger queries.
	Prometheus bool
	// LoadTester requires Flagger's load tester.
	LoadTester bool
	// ServiceProxy requires the service proxy (localfleet.Options).
	ServiceProxy bool
}

// EnvFleetDir names a running fleet to reuse.
const EnvFleetDir = "FLOTILLA_FLEET_DIR"

// Main starts or reuses a fleet, stores it in *fleet, runs the tests and stops
// the fleet if it started it. It returns the exit code for os.Exit.
func Main(m *testing.M, o Options, fleet **localfleet.Fleet) int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if dir := os.Getenv(EnvFleetDir); dir != "" {
		f, err := reuse(dir, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fleettest: %s=%s: %v\n", EnvFleetDir, dir, err)
			return 2
		}
		*fleet = f
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "flotilla-fleet-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleettest:", err)
		return 2
	}
	startCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	f, err := localfleet.Up(startCtx, localfleet.Options{
		Dir: dir, Clusters: o.Clusters, Tekton: o.Tekton, StockFlagger: o.StockFlagger,
		Prometheus: o.Prometheus, LoadTester: o.LoadTester, ServiceProxy: o.ServiceProxy, MeshProviders: o.MeshProviders,
		DieWithParent: true, Logger: log,
	})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleettest: starting fleet (logs in %s): %v\n", dir, err)
		return 2
	}
	*fleet = f
	code := m.Run()
	stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := f.Down(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "fleettest: stopping fleet:", err)
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "fleettest: fleet logs kept in %s\n", dir)
	}
	return code
}

func reuse(dir string, o Options) (*localfleet.Fleet, error) {
	f, err := localfleet.Load(dir)
	if err != nil {
		return nil, err
	}
	if !f.Running() {
		return nil, fmt.Errorf("the fleet there is not running (make fleet-up)")
	}
	if len(f.Clusters) < o.Clusters {
		return nil, fmt.Errorf("the fleet has %d clusters, the tests need %d", len(f.Clusters), o.Clusters)
	}
	if o.Prometheus && f.PrometheusURL == "" {
		return nil, fmt.Errorf("the fleet runs no Prometheus, the tests need it (fleet up -prometheus)")
	}
	if o.LoadTester && f.LoadTesterURL == "" {
		return nil, fmt.Errorf("the fleet runs no load tester, the tests need it (fleet up -load-tester)")
	}
	if o.ServiceProxy && f.ServiceProxy == "" {
		return nil, fmt.Errorf("the fleet runs no service proxy, the tests need it (fleet up -service-proxy)")
	}
	for _, c := range f.Clusters {
		if o.Tekton && !c.Tekton {
			return nil, fmt.Errorf("cluster %s runs without Tekton, the tests need it", c.Name)
		}
		if want := cmp.Or(o.MeshProviders[c.Name], "kubernetes"); cmp.Or(c.MeshProvider, "kubernetes") != want {
			return nil, fmt.Errorf("the Flagger of cluster %s runs -mesh-provider=%s, the tests need %s", c.Name, cmp.Or(c.MeshProvider, "kubernetes"), want)
		}
		if slices.Contains(o.StockFlagger, c.Name) && !c.StockFlagger {
			return nil, fmt.Errorf("cluster %s runs the fast Flagger, the tests need the stock one", c.Name)
		}
	}
	return f, nil
}
