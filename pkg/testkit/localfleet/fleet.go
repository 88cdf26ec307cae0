package localfleet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/flotilla-cd/flotilla/pkg/kube"
)

// Options configures a fleet. The zero value of every field but Dir is usable.
type Options struct {
	// Dir holds the fleet's state, kubeconfigs, logs and data. Required.
	Dir string
	// Clusters is how many clusters to start, named c1..cN. Default 1.
	Clusters int
	// Tekton also installs Tekton Pipelines' CRDs and runs its controller in
	// every cluster.
	Tekton bool
	// StockFlagger names the clusters that run the unpatched Flagger build (10 s
	// minimum analysis interval). The others run the fast build (1 s minimum).
	StockFlagger []string
	// MeshProviders is Flagger's -mesh-provider by cluster name (such as
	// "gatewayapi:v1", "istio"); default "kubernetes". A canary's
	// spec.provider (flotilla always sets it) overrides it.
	MeshProviders map[string]string
	// FlaggerEventWebhook, when set, is every Flagger's global -event-webhook.
	FlaggerEventWebhook string
	// NoFlagger starts the clusters without Flagger (neither its CRDs nor
	// its controller): `flotilla fleet bootstrap` installs it, and
	// StartFlagger runs the Deployment bootstrap applied.
	NoFlagger bool
	// Prometheus runs one Prometheus server for the fleet, which every
	// Flagger queries (-metrics-server) and which scrapes the targets a test
	// adds (Fleet.AddScrapeTarget). Without it Flagger's metrics server is
	// an address nothing listens on.
	Prometheus bool
	// LoadTester runs Flagger's load tester (with hey) as a host process at
	// Fleet.LoadTesterURL.
	LoadTester bool
	// ServiceProxy runs the service proxy every Flagger sends its requests
	// for cluster Services through (HTTP_PROXY), which a test routes to
	// host processes (Fleet.RouteService): Flagger's webhooks to the load
	// tester flotilla installs, for one.
	ServiceProxy bool
	// BinDir holds the built binaries. Default BinDir().
	BinDir string
	// DieWithParent kills every process of the fleet when the process that
	// started it dies (used by test runs, not by `fleet up`).
	DieWithParent bool
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
}

// Cluster is one running cluster of the fleet.
type Cluster struct {
	Name         string    `json:"name"`
	Kubeconfig   string    `json:"kubeconfig"`
	APIServer    string    `json:"apiServer"`
	FlaggerPort  int       `json:"flaggerPort"`
	StockFlagger bool      `json:"stockFlagger"`
	MeshProvider string    `json:"meshProvider,omitempty"`
	Tekton       bool      `json:"tekton"`
	Processes    []Process `json:"processes"`
	// AuditLog is the API server's audit log (JSON lines, audit.k8s.io/v1
	// Events): every patch of a Deployment, DaemonSet, StatefulSet or
	// Canary, with its body, so tests count applies on the cluster.
	AuditLog string `json:"auditLog"`

	ports clusterPorts
}

// RESTConfig is a client configuration with admin rights on the cluster.
func (c Cluster) RESTConfig() (*rest.Config, error) { return kube.RESTConfig(c.Kubeconfig, "") }

// Fleet is a running (or loaded) fleet.
type Fleet struct {
	Dir      string    `json:"dir"`
	Started  time.Time `json:"started"`
	Etcd     Process   `json:"etcd"`
	EtcdURL  string    `json:"etcdURL"`
	Clusters []Cluster `json:"clusters"`
	// BinDir holds the binaries the fleet runs.
	BinDir string `json:"binDir"`
	// DieWithParent is Options.DieWithParent, for processes started later.
	DieWithParent bool `json:"dieWithParent"`
	// Services are the fleet-wide processes (Prometheus, the load tester).
	Services []Process `json:"services,omitempty"`
	// PrometheusURL is the fleet's Prometheus (Options.Prometheus), else "".
	PrometheusURL string `json:"prometheusURL,omitempty"`
	// LoadTesterURL is the fleet's load tester (Options.LoadTester), else "".
	LoadTesterURL string `json:"loadTesterURL,omitempty"`
	// ServiceProxy is the fleet's service proxy (Options.ServiceProxy), else "".
	ServiceProxy string `json:"serviceProxy,omitempty"`

	mu sync.Mutex
}

const stateFile = "fleet.json"

// Cluster returns the cluster with that name.
func (f *Fleet) Cluster(name string) (Cluster, bool) {
	for _, c := range f.Clusters {
		if c.Name == name {
			return c, true
		}
	}
	return Cluster{}, false
}

// Load reads the state of the fleet in dir.
func Load(dir string) (*Fleet, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("reading fleet state: %w", err)
	}
	var f Fleet
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decoding fleet state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &f, nil
}

// Processes lists every process of the fleet, etcd last.
func (f *Fleet) Processes() []Process {
	var ps []Process
	for _, c := range f.Clusters {
		ps = append(ps, c.Processes...)
	}
	ps = append(ps, f.Services...)
	if f.Etcd.PID != 0 {
		ps = append(ps, f.Etcd)
	}
	return ps
}

// Running tells whether every process of the fleet is alive.
func (f *Fleet) Running() bool {
	ps := f.Processes()
	for _, p := range ps {
		if !p.running() {
			return false
		}
	}
	return len(ps) > 0
}

func (f *Fleet) save() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding fleet state: %w", err)
	}
	tmp := filepath.Join(f.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing fleet state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(f.Dir, stateFile)); err != nil {
		return fmt.Errorf("writing fleet state: %w", err)
	}
	return nil
}

// record adds a started process to its cluster (or as etcd) and saves the
// state at once, so a failed start can still be stopped.
func (f *Fleet) record(cluster int, p Process) error {
	f.mu.Lock()
	if cluster < 0 {
		f.Etcd = p
	} else {
		f.Clusters[cluster].Processes = append(f.Clusters[cluster].Processes, p)
	}
	f.mu.Unlock()
	return f.save()
}

// forget removes stopped processes from their cluster and saves the state,
// so Running still tells whether the rest of the fleet is alive.
func (f *Fleet) forget(cluster int, ps []Process) error {
	f.mu.Lock()
	f.Clusters[cluster].Processes = slices.DeleteFunc(f.Clusters[cluster].Processes, func(p Process) bool {
		return slices.ContainsFunc(ps, func(q Process) bool { return q.PID == p.PID && q.Name == p.Name })
	})
	f.mu.Unlock()
	return f.save()
}

// recordService adds a started fleet-wide process and saves the state.
func (f *Fleet) recordService(p Process) error {
	f.mu.Lock()
	f.Services = append(f.Services, p)
	f.mu.Unlock()
	return f.save()
}

// Up starts a fleet. On failure it stops whatever it had started.
func Up(ctx context.Context, o Options) (*Fleet, error) {
	o = o.withDefaults()
	if o.Dir == "" {
		return nil, errors.New("fleet dir is required")
	}
	bins := binaries{dir: o.BinDir}
	if err := bins.check(o); err != nil {
		return nil, err
	}
	if old, err := Load(o.Dir); err == nil {
		if old.Running() {
			return nil, fmt.Errorf("a fleet already runs in %s: stop it first", o.Dir)
		}
		// A dead fleet's leftovers (a crashed run): stop stragglers, start clean.
		_ = old.Down(ctx)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating fleet dir: %w", err)
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving fleet dir: %w", err)
	}
	f := &Fleet{Dir: dir, Started: time.Now().UTC(), BinDir: o.BinDir, DieWithParent: o.DieWithParent}
	if err := f.up(ctx, o, bins); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return nil, errors.Join(err, f.Down(stopCtx))
	}
	return f, nil
}

func (o Options) withDefaults() Options {
	if o.Clusters <= 0 {
		o.Clusters = 1
	}
	if o.BinDir == "" {
		o.BinDir = BinDir()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

func (f *Fleet) up(ctx context.Context, o Options, bins binaries) error {
	start := time.Now()
	ports, err := freePorts(ctx, etcdPorts+o.Clusters*portsPerCluster+servicePorts)
	if err != nil {
		return err
	}
	svcPorts := ports[len(ports)-servicePorts:]
	token, err := randomToken()
	if err != nil {
		return err
	}
	shared, err := writeSharedFiles(f.Dir, token)
	if err != nil {
		return err
	}
	for i := range o.Clusters {
		name := fmt.Sprintf("c%d", i+1)
		cp := newClusterPorts(ports[etcdPorts+i*portsPerCluster:])
		f.Clusters = append(f.Clusters, Cluster{
			Name:         name,
			Kubeconfig:   filepath.Join(f.Dir, name, "kubeconfig"),
			AuditLog:     filepath.Join(f.Dir, name, "audit.log"),
			APIServer:    fmt.Sprintf("https://127.0.0.1:%d", cp.apiserver),
			FlaggerPort:  cp.flagger,
			StockFlagger: slices.Contains(o.StockFlagger, name),
			MeshProvider: cmp.Or(o.MeshProviders[name], "kubernetes"),
			Tekton:       o.Tekton,
			ports:        cp,
		})
	}
	o.Logger.Info("starting etcd")
	if err := f.startEtcd(ctx, o, bins, ports[:etcdPorts]); err != nil {
		return err
	}
	// Before the clusters: their Flaggers are given Prometheus's address.
	if o.Prometheus {
		o.Logger.Info("starting prometheus")
		if err := f.startPrometheus(ctx, bins, svcPorts[0]); err != nil {
			return err
		}
	}
	if o.ServiceProxy {
		o.Logger.Info("starting the service proxy")
		if err := f.startServiceProxy(ctx, svcPorts[2]); err != nil {
			return err
		}
	}
	if o.LoadTester {
		o.Logger.Info("starting flagger's load tester")
		if err := f.startLoadTester(ctx, bins, svcPorts[1]); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for i := range f.Clusters {
		g.Go(func() error {
			s := clusterStarter{fleet: f, index: i, opts: o, bins: bins, shared: shared, token: token}
			return s.start(gctx)
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	o.Logger.Info("fleet ready", "clusters", len(f.Clusters), "dir", f.Dir, "took", time.Since(start).Round(time.Millisecond))
	return f.save()
}

// Down stops every process of the fleet, newest first, and removes etcd's data.
// Logs and kubeconfigs stay in the fleet dir.
func (f *Fleet) Down(ctx context.Context) error {
	var errs []error
	g := errgroup.Group{}
	for _, c := range f.Clusters {
		g.Go(func() error {
			for _, p := range slices.Backward(c.Processes) {
				if err := p.stop(ctx, 10*time.Second); err != nil {
					return err
				}
			}
			return nil
		})
	}
	errs = append(errs, g.Wait())
	// What real nodes stopped without RealNode.Stop left on the host.
	errs = append(errs, reapNodes(ctx, f.Dir))
	for _, p := range f.Services {
		errs = append(errs, p.stop(ctx, 10*time.Second))
	}
	errs = append(errs, f.Etcd.stop(ctx, 10*time.Second))
	errs = append(errs, os.RemoveAll(filepath.Join(f.Dir, "etcd-data")))
	if err := os.Remove(filepath.Join(f.Dir, stateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// ProcessRunning tells whether p, one of the fleet's processes, is alive.
func (f *Fleet) ProcessRunning(p Process) bool { return p.running() }
