package natstest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-cd/flotilla/pkg/testkit/freeport"
	"github.com/flotilla-cd/flotilla/pkg/testkit/localfleet"
)

// Version is the nats-server build.sh builds; keep them in step.
const Version = "2.15.2"

// Binary is where build.sh puts nats-server.
func Binary() string { return filepath.Join(localfleet.BinDir(), "nats-server-"+Version) }

// Cluster is a JetStream cluster of nats-server processes on loopback
// ports, each with its store under the cluster's directory.
type Cluster struct {
	dir   string
	nodes []*node
	auth  *Auth // nil: plain client ports
}

type node struct {
	name                   string
	client, route, monitor int
	conf, log              string
	cmd                    *exec.Cmd
	done                   chan struct{}
}

// Start runs a cluster of n nodes in dir (created when missing) and
// returns once JetStream answers on every node. It fails when the binary
// was not built (make fleet-build).
func Start(ctx context.Context, dir string, n int) (*Cluster, error) {
	return start(ctx, dir, n, nil)
}

// start is Start, with the client ports secured by auth unless it is nil.
func start(ctx context.Context, dir string, n int, auth *Auth) (*Cluster, error) {
	if _, err := os.Stat(Binary()); err != nil {
		return nil, fmt.Errorf("nats-server %s not built (make fleet-build): %w", Version, err)
	}
	if n < 1 {
		return nil, errors.New("natstest: a cluster needs a node")
	}
	ports, err := freeport.Ports(ctx, 3*n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, auth: auth}
	for i := range n {
		c.nodes = append(c.nodes, &node{name: fmt.Sprintf("n%d", i+1), client: ports[3*i], route: ports[3*i+1], monitor: ports[3*i+2]})
	}
	for _, nd := range c.nodes {
		if err := c.writeConfig(nd); err != nil {
			return nil, err
		}
	}
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, time.Minute); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) writeConfig(nd *node) error {
	d := filepath.Join(c.dir, nd.name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	var routes []string
	for _, o := range c.nodes {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.route))
	}
	cluster := ""
	if len(c.nodes) > 1 {
		cluster = fmt.Sprintf("cluster {\n  name: flotilla-test\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n",
			nd.route, strings.Join(routes, ", "))
	}
	secured := ""
	if c.auth != nil {
		secured = c.auth.config()
	}
	conf := fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
jetstream {
  store_dir: %q
  max_memory_store: 64MB
  max_file_store: 1GB
}
%s%s`, nd.name, nd.client, nd.monitor, filepath.Join(d, "jetstream"), cluster, secured)
	nd.conf, nd.log = filepath.Join(d, "nats.conf"), filepath.Join(d, "nats.log")
	return os.WriteFile(nd.conf, []byte(conf), 0o600)
}

// start runs node i (again, after Kill).
func (c *Cluster) start(i int) error {
	nd := c.nodes[i]
	logf, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(Binary(), "-c", nd.conf) //nolint:gosec,noctx // the pinned test binary; a node lives until Kill or Close, not a context
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting nats-server %s: %w", nd.name, err)
	}
	nd.cmd, nd.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(nd.done) }()
	return nil
}

// URL is every node's client URL, comma-separated, as nats.Connect takes
// a cluster's: nats:// URLs, tls:// ones for a secured cluster.
func (c *Cluster) URL() string {
	var urls []string
	for i := range c.nodes {
		urls = append(urls, c.NodeURL(i))
	}
	return strings.Join(urls, ",")
}

// NodeURL is node i's client URL.
func (c *Cluster) NodeURL(i int) string {
	scheme := "nats"
	if c.auth != nil {
		scheme = "tls"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, c.nodes[i].client)
}

// Log is node i's log file.
func (c *Cluster) Log(i int) string { return c.nodes[i].log }

// Kill stops node i at once (SIGKILL), as a crashed node.
func (c *Cluster) Kill(i int) {
	nd := c.nodes[i]
	if nd.cmd == nil {
		return
	}
	_ = syscall.Kill(-nd.cmd.Process.Pid, syscall.SIGKILL)
	<-nd.done
	nd.cmd = nil
}

// Restart starts node i again on its store, after Kill, and waits until
// JetStream answers on every node.
func (c *Cluster) Restart(ctx context.Context, i int) error {
	if c.nodes[i].cmd != nil {
		return fmt.Errorf("natstest: node %s is running", c.nodes[i].name)
	}
	if err := c.start(i); err != nil {
		return err
	}
	return c.WaitReady(ctx, time.Minute)
}

// WaitReady waits until every running node's JetStream is healthy
// (/healthz: the meta group has a leader and the node is current).
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, nd := range c.nodes {
		if nd.cmd == nil {
			continue
		}
		url := fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.monitor)
		for {
			ok, last := healthy(ctx, url)
			if ok {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("nats-server %s not healthy (log %s): %s: %w", nd.name, nd.log, last, ctx.Err())
			case <-nd.done:
				return fmt.Errorf("nats-server %s exited (log %s)", nd.name, nd.log)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func healthy(ctx context.Context, url string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err.Error()
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, resp.Status
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for i := range c.nodes {
		c.Kill(i)
	}
}

// Main runs a test package's tests with a cluster of n nodes started for
// them all (its directory kept when a test failed, for the nodes' logs);
// *c is the cluster. Use it from TestMain: os.Exit(natstest.Main(m, 3, &cluster)).
func Main(m *testing.M, n int, c **Cluster) int {
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	*c, err = Start(ctx, dir, n)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting NATS:", err)
		return 1
	}
	code := m.Run()
	(*c).Stop()
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "the NATS nodes' logs are under", dir)
	}
	return code
}
