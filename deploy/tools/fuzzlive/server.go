package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-cd/flotilla/deploy/tools/internal/proc"
)

// buildFlotilla builds the flotilla binary of the module at root into dir.
func buildFlotilla(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "flotilla")
	goBin := "go"
	if g := os.Getenv("GO"); g != "" {
		goBin = g
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building flotilla: %w\n%s", err, out)
	}
	return bin, nil
}

// flotilla is the `flotilla serve` under test, a child process that the
// fuzzer kills and restarts on the same data dir and port.
type flotilla struct {
	bin, config, dataDir, addr, log, logLevel string
	// token is the API token its reads send.
	token string

	p      *proc.Proc
	starts int
	client *http.Client
}

// readyTimeout bounds a start: prune against the refusing cluster fails at
// once, so flotilla is ready within a second or two.
const readyTimeout = 30 * time.Second

// start starts flotilla and waits for /readyz.
func (f *flotilla) start(ctx context.Context) error {
	f.starts++
	if lf, err := os.OpenFile(f.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(lf, "=== fuzz-live: start %d of flotilla serve at %s ===\n", f.starts, time.Now().UTC().Format(time.RFC3339Nano))
		_ = lf.Close()
	}
	p, err := proc.Start(ctx, "flotilla", f.log, f.bin, "serve", "--config", f.config,
		"--listen", f.addr, "--data-dir", f.dataDir, "--log-level", f.logLevel)
	if err != nil {
		return err
	}
	f.p = p
	return p.WaitHTTP(ctx, f.url("/readyz"), readyTimeout)
}

func (f *flotilla) url(path string) string { return "http://" + f.addr + path }

// alive tells whether the process runs.
func (f *flotilla) alive() bool { return f.p != nil && !f.p.Exited() }

// exit says how the process ended.
func (f *flotilla) exit() string {
	if f.p == nil {
		return "not started"
	}
	return f.p.State()
}

func (f *flotilla) get(ctx context.Context, path string, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url(path), nil)
	if err != nil {
		return 0, nil, err
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// healthz is GET /healthz: its status and body.
func (f *flotilla) healthz(ctx context.Context) (int, string, error) {
	status, b, err := f.get(ctx, "/healthz", 5*time.Second)
	return status, strings.TrimSpace(string(b)), err
}

// metrics reads /metrics into series ("name{labels}") -> value.
func (f *flotilla) metrics(ctx context.Context) (metrics, error) {
	status, b, err := f.get(ctx, "/metrics", 10*time.Second)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %d", status)
	}
	return parseMetrics(string(b)), nil
}

// metrics are Prometheus text-format samples by series.
type metrics map[string]float64

func parseMetrics(text string) metrics {
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[line[:i]] = v
	}
	return m
}

// sum adds the samples of metric name whose labels contain every one of
// labels (`outcome="panic"`).
func (m metrics) sum(name string, labels ...string) float64 {
	var total float64
	for series, v := range m {
		base, rest, _ := strings.Cut(series, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// kill sends SIGKILL and waits until the process is gone.
func (f *flotilla) kill() {
	if f.p != nil {
		f.p.Kill()
	}
}

// stop ends flotilla gracefully.
func (f *flotilla) stop() {
	if f.p != nil {
		f.p.Stop(10 * time.Second)
	}
}

// logTail is the end of flotilla's log.
func (f *flotilla) logTail(n int) string { return proc.Tail(f.log, n) }
