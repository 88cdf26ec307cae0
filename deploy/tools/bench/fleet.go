package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	flaggerclient "github.com/fluxcd/flagger/pkg/client/clientset/versioned"
	"github.com/google/go-containerregistry/pkg/registry"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
	"github.com/flotilla-cd/flotilla/pkg/testkit/sigtest"
)

// bench owns what every scenario shares: the fleet and the registry.
type bench struct {
	o        options
	log      *slog.Logger
	dir      string
	fleet    *localfleet.Fleet
	real     []*realCluster
	registry *httptest.Server
	regHost  string
	probe    *stallProbe
	// signer signs every version of the measured application, whose
	// policy trusts its key.
	signer *sigtest.Keypair
	// nats is the three-node JetStream cluster of the scale-out
	// scenarios (-scale-out), nil without them.
	nats *natstest.Cluster
	// pod is the real node flotilla's pod runs on (-pod), nil without it.
	pod *podNode
	// proxies serves the named clusters' namespace proxies, started with
	// the first (nil before).
	proxies *proxyHost
	// group is the CPU cgroup the fleet's processes run in
	// (-fleet-cpu-shares; nil: none).
	group *fleetGroup
}

// realCluster is one cluster of the local fleet with the bench's clients.
type realCluster struct {
	name    string
	cfg     *rest.Config
	kube    kubernetes.Interface
	flagger flaggerclient.Interface
}

func newBench(ctx context.Context, o options, logger *slog.Logger) (*bench, error) {
	dir, err := os.MkdirTemp("", "flotilla-bench-*")
	if err != nil {
		return nil, err
	}
	b := &bench{o: o, log: logger, dir: dir, probe: newStallProbe(ctx), signer: sigtest.NewKeypair()}
	logger.Info("starting the local fleet", "clusters", o.clusters, "dir", dir)
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	b.fleet, err = localfleet.Up(startCtx, localfleet.Options{
		Dir: filepath.Join(dir, "fleet"), Clusters: o.clusters, Tekton: false,
		DieWithParent: true, Logger: logger,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting the fleet (binaries built? make fleet-build): %w", err)
	}
	logger.Info("fleet ready", "took", time.Since(start).Round(time.Second))
	for _, c := range b.fleet.Clusters {
		cfg, err := c.RESTConfig()
		if err != nil {
			b.close() //nolint:contextcheck // teardown outlives the caller's ctx
			return nil, err
		}
		rc := &realCluster{name: c.Name, cfg: cfg}
		if rc.kube, err = kubernetes.NewForConfig(cfg); err == nil {
			rc.flagger, err = flaggerclient.NewForConfig(cfg)
		}
		if err != nil {
			b.close() //nolint:contextcheck // teardown outlives the caller's ctx
			return nil, err
		}
		b.real = append(b.real, rc)
	}
	if o.scaleOut > 0 {
		if b.nats, err = natstest.Start(startCtx, filepath.Join(dir, "nats"), 3); err != nil {
			b.close() //nolint:contextcheck // teardown outlives the caller's ctx
			return nil, fmt.Errorf("starting NATS (make fleet-build builds it): %w", err)
		}
	}
	b.registry = httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	b.regHost = strings.TrimPrefix(b.registry.URL, "http://")
	return b, nil
}

func (b *bench) close() {
	b.stopPodNode()
	if b.proxies != nil {
		b.proxies.stop()
	}
	if b.nats != nil {
		b.nats.Stop()
	}
	if b.registry != nil {
		b.registry.Close()
	}
	if b.fleet != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := b.fleet.Down(ctx); err != nil {
			b.log.Warn("stopping the fleet", "error", err)
		}
	}
	b.group.close()
	if b.o.keep {
		b.log.Info("fleet directory kept", "dir", b.dir)
		return
	}
	_ = os.RemoveAll(b.dir)
}

// fleetRSS sums the resident memory of the fleet's processes, in MiB.
func (b *bench) fleetRSS() map[string]float64 {
	out := map[string]float64{}
	for _, p := range b.fleet.Processes() {
		kind := p.Name
		if i := strings.Index(kind, "-"); i > 0 && strings.HasPrefix(kind, "c") {
			kind = kind[i+1:]
		}
		out[kind] += float64(rssKiB(p.PID)) / 1024
	}
	return out
}

func (b *bench) fleetPIDs() []int {
	var out []int
	for _, p := range b.fleet.Processes() {
		out = append(out, p.PID)
	}
	if b.proxies != nil {
		out = append(out, b.proxies.pid())
	}
	return out
}

// openProxy opens a namespace proxy in the proxy host (started with the
// first) to real cluster rc, rewriting namespace from to to.
func (b *bench) openProxy(rc *realCluster, from, to string) (*nsProxyHandle, error) {
	if b.proxies == nil {
		h, err := startProxyHost(b.dir, b.o.fleetNice)
		if err != nil {
			return nil, err
		}
		b.proxies = h
		if err := b.group.add(h.pid()); err != nil {
			return nil, err
		}
	}
	addr, err := b.proxies.open(b.fleetKubeconfig(rc.name), from, to)
	if err != nil {
		return nil, err
	}
	return &nsProxyHandle{addr: addr, host: b.proxies}, nil
}

// nsProxyHandle is a namespace proxy the proxy host serves.
type nsProxyHandle struct {
	addr string
	host *proxyHost
}

func (p *nsProxyHandle) close() { _ = p.host.closeProxy(p.addr) }

// cpuTime is the user+system CPU time the processes have used so far.
func cpuTime(pids ...int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// machineCPU is the machine's idle and steal time so far, summed over its
// CPUs (/proc/stat's first line): over a window, idle is what no process
// used, and steal what the hypervisor gave to others (a VM's vCPUs stolen
// stall every process at once).
func machineCPU() (idle, steal time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0
	}
	i, _ := strconv.ParseInt(f[4], 10, 64)
	st, _ := strconv.ParseInt(f[8], 10, 64)
	return time.Duration(i) * time.Second / 100, time.Duration(st) * time.Second / 100
}

// nsProxy makes one real API server look like another cluster: it forwards
// every request to the real server with the application's namespace replaced
// by this named cluster's own namespace, in the path and in the body. It lets
// a 2-core machine give each of 50 named clusters its own Deployment and
// Canary, on fewer real API servers.
type nsProxy struct {
	srv      *http.Server
	addr     string
	target   *url.URL
	rt       http.RoundTripper
	from, to string
}

// newNSProxy starts a proxy on a loopback port, serving TLS (and so
// HTTP/2, as an API server does) when tlsCfg is not nil.
func newNSProxy(ctx context.Context, real *rest.Config, from, to string, tlsCfg *tls.Config) (*nsProxy, error) {
	target, err := url.Parse(real.Host)
	if err != nil {
		return nil, err
	}
	rt, err := rest.TransportFor(real)
	if err != nil {
		return nil, err
	}
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &nsProxy{addr: l.Addr().String(), target: target, rt: rt, from: from, to: to}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	if tlsCfg != nil {
		go func() { _ = p.srv.ServeTLS(l, "", "") }()
		return p, nil
	}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *nsProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	path = strings.Replace(path, "/namespaces/"+p.from+"/", "/namespaces/"+p.to+"/", 1)
	if strings.HasSuffix(path, "/namespaces/"+p.from) {
		path = strings.TrimSuffix(path, p.from) + p.to
	}
	u := *p.target
	u.Path, u.RawQuery = path, r.URL.RawQuery
	var body io.Reader
	var n int64
	if r.Body != nil {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		raw = bytes.ReplaceAll(raw, []byte(`"namespace":"`+p.from+`"`), []byte(`"namespace":"`+p.to+`"`))
		body, n = bytes.NewReader(raw), int64(len(raw))
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.ContentLength = n
	for k, vs := range r.Header {
		if k == "Authorization" || k == "Content-Length" || k == "Connection" {
			continue
		}
		out.Header[k] = vs
	}
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if r.URL.Query().Get("watch") == "" {
		_, _ = io.Copy(w, resp.Body)
		return
	}
	// A watch streams: each event goes on at once, as the API server sent
	// it, not when the server's write buffer fills (a watch cache behind
	// this proxy would lag the cluster by kilobytes of events).
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil || rc.Flush() != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *nsProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// writeProxyKubeconfig writes a kubeconfig that reaches a cluster through p.
func writeProxyKubeconfig(path, name string, p *nsProxyHandle) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + p.addr, CertificateAuthorityData: p.host.caPEM}
	cfg.AuthInfos["bench"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: "bench"}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// confine gives the fleet's processes their nice value (-fleet-nice) and
// puts them in a CPU cgroup of the lowest weight (-fleet-cpu-shares).
func (b *bench) confine() error {
	if err := renice(b.fleetPIDs(), b.o.fleetNice); err != nil {
		return err
	}
	if b.o.fleetShares == 0 {
		return nil
	}
	g, err := newFleetGroup(b.o.fleetShares)
	if err != nil {
		return err
	}
	b.group = g
	return g.add(b.fleetPIDs()...)
}

// renice gives every thread of the processes the nice value: Linux keeps
// nice per thread, and threads started later inherit their creator's.
func renice(pids []int, nice int) error {
	if nice == 0 {
		return nil
	}
	for _, pid := range pids {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return fmt.Errorf("renice %d: %w", pid, err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("renice %d (thread %d): %w", pid, tid, err)
			}
		}
	}
	return nil
}
