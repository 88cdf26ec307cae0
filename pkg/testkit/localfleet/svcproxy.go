package localfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The service proxy stands in for cluster DNS and Services for the
// fleet's host processes. Flagger runs on the host, not in a pod, so a
// webhook URL such as http://loadtester-podinfo.demo/ (the load tester
// flotilla installs with testLoader: true) resolves nowhere. Every Flagger
// is started with HTTP_PROXY pointing here, its cluster's name as the
// proxy user; the proxy sends a request for <service>.<namespace>[.svc
// [.cluster.local]] of that cluster to the host address a test routed the
// Service to (Fleet.RouteService), and answers 502 naming the Service
// otherwise. Loopback URLs never go through a proxy (Go's rule), so
// Flagger's API server, Prometheus and 127.0.0.1 webhooks are unaffected.
//
// The proxy is this very binary started again (os.Executable) with
// envServiceProxy set: the package's init serves and never returns, the
// re-exec pattern of moby's pkg/reexec. It outlives the process that
// started the fleet exactly as the fleet's other processes do.

// envServiceProxy carries "<listen address>;<routes file>" to the re-executed binary.
const envServiceProxy = "FLOTILLA_FLEET_SERVICE_PROXY"

// servicesFile holds the routes: cluster -> "<service>.<namespace>" -> host:port.
const servicesFile = "services.json"

func init() {
	if spec := os.Getenv(envServiceProxy); spec != "" {
		addr, routes, _ := strings.Cut(spec, ";")
		err := serveServiceProxy(addr, routes)
		fmt.Fprintln(os.Stderr, "service proxy:", err)
		os.Exit(1)
	}
}

func serveServiceProxy(addr, routes string) error {
	srv := &http.Server{Addr: addr, Handler: serviceProxy{routes: routes}, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}

type serviceProxy struct{ routes string }

func (p serviceProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Host == "" { // not a proxy request: the health check
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte("ok\n"))
			return
		}
		http.Error(w, "a proxy: send absolute URLs", http.StatusBadRequest)
		return
	}
	if r.Method == http.MethodConnect {
		http.Error(w, "the fleet's service proxy routes plain HTTP only", http.StatusMethodNotAllowed)
		return
	}
	cluster, _, _ := r.BasicAuth()
	if cluster == "" {
		// BasicAuth reads Authorization; a proxy's credentials come in
		// Proxy-Authorization.
		r2 := &http.Request{Header: http.Header{"Authorization": r.Header.Values("Proxy-Authorization")}}
		cluster, _, _ = r2.BasicAuth()
	}
	svc := serviceName(r.URL.Hostname())
	target, err := lookupService(p.routes, cluster, svc)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	r.Header.Del("Proxy-Authorization")
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.Out.URL.Scheme, pr.Out.URL.Host = "http", target
		pr.Out.Host = r.Host
	}}
	rp.ServeHTTP(w, r)
}

// serviceName turns a cluster DNS name into "<service>.<namespace>".
func serviceName(host string) string {
	host = strings.TrimSuffix(host, ".")
	host = strings.TrimSuffix(host, ".cluster.local")
	return strings.TrimSuffix(host, ".svc")
}

func lookupService(routes, cluster, svc string) (string, error) {
	m, err := readRoutes(routes)
	if err != nil {
		return "", err
	}
	if t, ok := m[cluster][svc]; ok {
		return t, nil
	}
	return "", fmt.Errorf("the fleet routes no Service %s in cluster %q to the host (Fleet.RouteService)", svc, cluster)
}

func readRoutes(path string) (map[string]map[string]string, error) {
	m := map[string]map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return m, nil
}

// startServiceProxy runs the service proxy (this binary, re-executed).
func (f *Fleet) startServiceProxy(ctx context.Context, port int) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary for the service proxy: %w", err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	f.ServiceProxy = "http://" + addr
	env := []string{envServiceProxy + "=" + addr + ";" + filepath.Join(f.Dir, servicesFile)}
	p, err := startProcess(ctx, f.Dir, "service-proxy", exe, nil, env, f.DieWithParent)
	if err != nil {
		return err
	}
	if err := f.recordService(p); err != nil {
		return err
	}
	return waitFor(ctx, p, 30*time.Second, "service proxy healthy", func(ctx context.Context) (bool, error) {
		return httpOK(ctx, f.ServiceProxy+"/healthz", ""), nil
	})
}

// proxyEnv is the environment that sends a cluster's host processes'
// requests for cluster services through the service proxy.
func (f *Fleet) proxyEnv(cluster string) []string {
	if f.ServiceProxy == "" {
		return nil
	}
	u := strings.Replace(f.ServiceProxy, "http://", "http://"+cluster+":fleet@", 1)
	return []string{"HTTP_PROXY=" + u, "http_proxy=" + u}
}

// RouteService has the Flagger of cluster reach the Service
// namespace/name (by its cluster DNS name, any port) at hostPort, a
// process on this host. The fleet must run the service proxy
// (Options.ServiceProxy).
func (f *Fleet) RouteService(cluster, namespace, name, hostPort string) error {
	if f.ServiceProxy == "" {
		return errors.New("the fleet runs no service proxy (start it with ServiceProxy: true)")
	}
	if _, ok := f.Cluster(cluster); !ok {
		return fmt.Errorf("the fleet has no cluster %q", cluster)
	}
	if _, _, err := net.SplitHostPort(hostPort); err != nil {
		return fmt.Errorf("routing %s/%s: %w", namespace, name, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := filepath.Join(f.Dir, servicesFile)
	m, err := readRoutes(path)
	if err != nil {
		return err
	}
	if m[cluster] == nil {
		m[cluster] = map[string]string{}
	}
	m[cluster][name+"."+namespace] = hostPort
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
