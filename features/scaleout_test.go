package features

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-cd/flotilla/pkg/testkit/natstest"
)

// natsCluster is the package's three-node JetStream cluster, which the
// scale-out suite's replicas share (each scenario its own stream).
var natsCluster *natstest.Cluster

// replicaCount is how many `flotilla serve` a scale-out scenario runs.
const replicaCount = 3

// busConfig is server.bus of a scale-out scenario: its own stream (and
// buckets) on the package's NATS cluster, replicated on its three nodes.
func busConfig(stream string) map[string]any {
	return map[string]any{"url": natsCluster.URL(), "stream": stream, "replicas": 3, "partitions": 6}
}

// newReplicas stands for the scale-out replicas of a scenario, each with
// its own data directory (its git mirror) and name, behind one address.
func newReplicas(cfgPath, listen, dir, name string) *flotillaProcess {
	g := &flotillaProcess{config: cfgPath, listen: listen, logPath: filepath.Join(dir, "flotilla-r0.log")}
	for i := range replicaCount {
		g.replicas = append(g.replicas, &flotillaProcess{
			config:  cfgPath,
			logPath: filepath.Join(dir, fmt.Sprintf("flotilla-r%d.log", i)),
			args:    []string{"--data-dir", filepath.Join(dir, fmt.Sprintf("data-r%d", i))},
			env:     []string{fmt.Sprintf("POD_NAME=%s-r%d", name, i)},
		})
	}
	return g
}

// startReplicas starts the proxy (once) and every replica that is not
// running, each on a port of its own.
func (p *flotillaProcess) startReplicas(ctx context.Context) error {
	if p.proxy == nil {
		px, err := newReplicaProxy(ctx, p.listen, p.replicas)
		if err != nil {
			return err
		}
		p.proxy = px
	}
	natsNodeMu.RLock()
	defer natsNodeMu.RUnlock()
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range p.replicas {
		if r.running() {
			continue
		}
		g.Go(func() error { return r.startReplica(ctx) })
	}
	return g.Wait()
}

// startReplica starts one replica on a new port.
func (r *flotillaProcess) startReplica(ctx context.Context) error {
	listen, err := freePort(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.listen = listen
	r.mu.Unlock()
	return r.start(ctx)
}

// running tells whether the process was started and has not exited.
func (p *flotillaProcess) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// address is where the replica listens ("" before its first start).
func (p *flotillaProcess) address() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listen
}

// dumpGoroutines has every running replica print its goroutines to its
// log (SIGQUIT, which also ends it): what a failed scenario's replicas
// were waiting for.
func (p *flotillaProcess) dumpGoroutines() {
	for _, r := range p.replicas {
		r.mu.Lock()
		cmd, done := r.cmd, r.done
		r.mu.Unlock()
		if cmd == nil || !r.running() {
			continue
		}
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}
}

// logs are the log tails of the process or of every replica.
func (p *flotillaProcess) logs(n int) string {
	if p.replicas == nil {
		return tail(p.logPath, n)
	}
	var b strings.Builder
	for i, r := range p.replicas {
		fmt.Fprintf(&b, "--- replica %d (%s):\n%s\n", i, r.logPath, tail(r.logPath, n))
	}
	return b.String()
}

// logLines are the lines of the process's log (every replica's) holding
// every one of subs, up to 60 per log: what it did with one rollout.
func (p *flotillaProcess) logLines(subs ...string) string {
	logs := []*flotillaProcess{p}
	if p.replicas != nil {
		logs = p.replicas
	}
	var b strings.Builder
	for i, r := range logs {
		data, err := os.ReadFile(r.logPath)
		if err != nil {
			continue
		}
		var lines []string
		for line := range strings.Lines(string(data)) {
			if !slices.ContainsFunc(subs, func(s string) bool { return !strings.Contains(line, s) }) {
				lines = append(lines, line)
			}
		}
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		fmt.Fprintf(&b, "--- log %d (%s), %d lines:\n%s", i, r.logPath, len(lines), strings.Join(lines, ""))
	}
	return b.String()
}

// replicaProxy is the replicas' Service: it sends each request to the
// next running replica in turn, and on to another when one refuses the
// connection (a replica killed or restarting), as kube-proxy stops
// routing to a pod that is gone. Streams (the watch) flow unbuffered.
type replicaProxy struct {
	srv      *http.Server
	replicas []*flotillaProcess
	next     atomic.Uint64
}

type bodyKey struct{}

func newReplicaProxy(ctx context.Context, listen string, replicas []*flotillaProcess) (*replicaProxy, error) {
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("listening for the replicas' proxy: %w", err)
	}
	px := &replicaProxy{replicas: replicas}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "replica" },
		Transport:     px,
		FlushInterval: -1,
	}
	px.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// The body is kept, to send it again to another replica.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), bodyKey{}, body)))
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = px.srv.Serve(l) }()
	return px, nil
}

// RoundTrip tries the replicas in turn from the next one.
func (px *replicaProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	body, _ := req.Context().Value(bodyKey{}).([]byte)
	start := px.next.Add(1)
	var errs []error
	for i := range uint64(len(px.replicas)) {
		r := px.replicas[(start+i)%uint64(len(px.replicas))]
		addr := r.address()
		if addr == "" || !r.running() {
			continue
		}
		out := req.Clone(req.Context())
		out.URL.Host, out.Host = addr, addr
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, err)
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("no replica answers: %w", errors.Join(errs...))
}

func (px *replicaProxy) close() { _ = px.srv.Close() }

// deleteStream removes a scenario's stream and buckets from the NATS
// cluster, so scenarios do not pile up streams on its nodes.
func deleteStream(stream string) {
	nc, err := nats.Connect(natsCluster.URL())
	if err != nil {
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names := js.StreamNames(ctx)
	var mine []string
	for n := range names.Name() {
		if n == stream || strings.HasPrefix(n, "KV_"+stream+"_") {
			mine = append(mine, n)
		}
	}
	var wg sync.WaitGroup
	for _, n := range mine {
		wg.Go(func() { _ = js.DeleteStream(ctx, n) })
	}
	wg.Wait()
}
