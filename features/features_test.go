package features

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cucumber/godog"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

var fleet *localfleet.Fleet

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "flotilla-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if flotillaBin, err = buildFlotilla(context.Background(), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer stopGitea()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	natsCluster, err = natstest.Start(ctx, filepath.Join(dir, "nats"), 3)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting NATS:", err)
		return 2
	}
	defer natsCluster.Stop()
	return fleettest.Main(m, fleettest.Options{
		Clusters:     4,
		Tekton:       true,
		StockFlagger: []string{"c3"},
		// The analysis features route through the Gateway API in c1 and
		// Istio in c2, where Flagger runs with that mesh provider, as
		// `flotilla fleet bootstrap` starts it for such applications.
		MeshProviders: map[string]string{"c1": "gatewayapi:v1", "c2": "istio"},
		Prometheus:    true,
		LoadTester:    true,
		ServiceProxy:  true,
	}, &fleet)
}

// Scenarios tagged @pending are written and not yet passed on the fleet:
// make test leaves them out until a run on the fleet passes them.
func TestFeatures(t *testing.T) { runSuite(t, false, "~@scale-out && ~@pending") }

// TestFeaturesScaleOut runs the scenarios of both modes, and those of
// scale-out mode only, on three replicas sharing a NATS cluster.
func TestFeaturesScaleOut(t *testing.T) { runSuite(t, true, "@both-modes,@scale-out && ~@pending") }

// runSuite runs the features of tags, in scale-out mode or embedded.
func runSuite(t *testing.T, scaleOut bool, tags string) {
	t.Helper()
	name := "flotilla"
	if scaleOut {
		name = "flotilla scale-out"
	}
	suite := godog.TestSuite{
		Name:                name,
		ScenarioInitializer: func(sc *godog.ScenarioContext) { initializeScenario(sc, scaleOut) },
		Options: &godog.Options{
			Format:   "pretty",
			Paths:    []string{"."},
			Tags:     tags,
			TestingT: t,
			Strict:   true,
			NoColors: true,
			// Scenarios use their own namespaces, so they run side by side: most
			// of their time is spent waiting for controllers. Fewer of scale-out's
			// (three replicas and a NATS cluster's load each): at 6 and 6, a
			// 2-core machine ran at a load of 40 and replicas missed their
			// readiness deadline while NATS answered slowly.
			Concurrency: concurrency(scaleOut),
		},
	}
	status := suite.Run()
	timings.report(t, 15)
	failures.report(t)
	if status != 0 {
		t.Fatal("features failed")
	}
}

// failures are the scenarios that failed, recapped at the suite's end:
// a CI shows the end of a long output, where the failure said as it
// happened is long scrolled away.
var failures failureRecap

type failureRecap struct {
	mu    sync.Mutex
	lines []string
}

func (f *failureRecap) add(scenario, step string, err error) {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] + " [...]"
	}
	if len(msg) > 600 {
		msg = msg[:600] + " [...]"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, fmt.Sprintf("%q at step %q: %s", scenario, step, msg))
}

// report says the failures of the suite so far, and forgets them.
func (f *failureRecap) report(t *testing.T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.lines) == 0 {
		return
	}
	t.Logf("%d scenarios failed:\n  %s", len(f.lines), strings.Join(f.lines, "\n  "))
	f.lines = nil
}

// concurrency is how many scenarios of a suite run side by side.
func concurrency(scaleOut bool) int {
	if scaleOut {
		return 4
	}
	return 5
}

var (
	clientsMu sync.Mutex
	clients   = map[string]*fleettest.Clients{}
)

// fleet is the scenario's fleet: its own, when a step started one, else
// the package's.
func (s *scenario) fleet() *localfleet.Fleet {
	if s.w != nil && s.w.ownFleet != nil {
		return s.w.ownFleet
	}
	return fleet
}

// clientsFor returns clients for a cluster of the scenario's fleet.
func (s *scenario) clientsFor(name string) (*fleettest.Clients, error) {
	if s.w != nil && s.w.ownFleet != nil {
		cl, ok := s.w.ownFleet.Cluster(name)
		if !ok {
			return nil, fmt.Errorf("the scenario's fleet has no cluster %q", name)
		}
		return fleettest.NewClients(cl)
	}
	return clientsFor(name)
}

// clientsFor returns (cached) clients for a cluster of the fleet.
func clientsFor(name string) (*fleettest.Clients, error) {
	clientsMu.Lock()
	defer clientsMu.Unlock()
	if c, ok := clients[name]; ok {
		return c, nil
	}
	cl, ok := fleet.Cluster(name)
	if !ok {
		return nil, fmt.Errorf("the fleet has no cluster %q", name)
	}
	c, err := fleettest.NewClients(cl)
	if err != nil {
		return nil, err
	}
	clients[name] = c
	return c, nil
}

func initializeScenario(sc *godog.ScenarioContext, scaleOut bool) {
	s := &scenario{scaleOut: scaleOut}
	timings.record(sc)
	var failedStep string
	sc.StepContext().After(func(ctx context.Context, st *godog.Step, status godog.StepResultStatus, _ error) (context.Context, error) {
		if status == godog.StepFailed && failedStep == "" {
			failedStep = st.Text
		}
		return ctx, nil
	})
	sc.After(func(ctx context.Context, sn *godog.Scenario, err error) (context.Context, error) {
		s.failed = err != nil
		if s.failed {
			// Said before the cleanup prints the logs' tails, so the
			// reason heads what a CI shows of a long failure.
			fmt.Fprintf(os.Stderr, "--- scenario %q failed at step %q: %v\n", sn.Name, failedStep, err)
			failures.add(sn.Name, failedStep, err)
		}
		s.cleanup()
		return ctx, nil
	})
	s.registerClusterSteps(sc)
	s.registerFlaggerSteps(sc)
	s.registerTektonSteps(sc)
	s.registerTektonEventSteps(sc)
	s.registerValidationSteps(sc)
	s.registerGitOpsSteps(sc)
	s.registerGitSteps(sc)
	s.registerKubeCDSteps(sc)
	s.registerPruneSteps(sc)
	s.registerWorkloadsSteps(sc)
	s.registerSetsSteps(sc)
	s.registerSchemaSteps(sc)
	s.registerPullRequestSteps(sc)
	s.registerMergeFaultSteps(sc)
	s.registerInstallSteps(sc)
	s.registerChartSteps(sc)
	s.registerBootstrapSteps(sc)
	s.registerForeignFlaggerSteps(sc)
	s.registerTektonExecutorSteps(sc)
	s.registerRolloutSteps(sc)
	s.registerTaskSteps(sc)
	s.registerCLISteps(sc)
	s.registerSimulateSteps(sc)
	s.registerKubectlCLISteps(sc)
	s.registerEngineSteps(sc)
	s.registerImageSetSteps(sc)
	s.registerSetMixSteps(sc)
	s.registerWaveSteps(sc)
	s.registerRevertMissedSteps(sc)
	s.registerControlSteps(sc)
	s.registerSignatureSteps(sc)
	s.registerAnalysisSteps(sc)
	s.registerSeedSteps(sc)
	s.registerVisibilitySteps(sc)
	s.registerMetricsSteps(sc)
	s.registerUISteps(sc)
	s.registerAuthnSteps(sc)
	s.registerAuditSteps(sc)
	s.registerTokenSteps(sc)
	s.registerApproverSteps(sc)
	s.registerTracingSteps(sc)
	s.registerScaleOutSteps(sc)
	s.registerRegistrySteps(sc)
	s.registerSenderSteps(sc)
	s.registerPollSteps(sc)
	s.registerApplicationSteps(sc)
	s.registerCatchUpSteps(sc)
	s.registerLabelSteps(sc)
	s.registerSSOSteps(sc)
	s.registerReloadSteps(sc)
	s.registerDiscoverySteps(sc)
	s.registerResourcesSteps(sc)
}
