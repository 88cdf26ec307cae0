package localfleet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestServiceProxy sends requests through the proxy as Flagger does (its
// cluster as the proxy user) and checks where each one lands.
func TestServiceProxy(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "backend "+r.Host+r.URL.Path)
	}))
	defer backend.Close()
	dir := t.TempDir()
	f := &Fleet{Dir: dir, Clusters: []Cluster{{Name: "c1"}, {Name: "c2"}}, ServiceProxy: "set"}
	if err := f.RouteService("c1", "demo", "loadtester-podinfo", strings.TrimPrefix(backend.URL, "http://")); err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(serviceProxy{routes: filepath.Join(dir, servicesFile)})
	defer proxy.Close()

	tests := []struct {
		name, cluster, url string
		wantStatus         int
		wantBody           string
	}{
		{"short name", "c1", "http://loadtester-podinfo.demo/", 200, "backend loadtester-podinfo.demo/"},
		{"cluster DNS name and a port", "c1", "http://loadtester-podinfo.demo.svc.cluster.local:80/gate", 200, "backend loadtester-podinfo.demo.svc.cluster.local:80/gate"},
		{"another cluster", "c2", "http://loadtester-podinfo.demo/", 502, "the fleet routes no Service loadtester-podinfo.demo in cluster \"c2\" to the host (Fleet.RouteService)\n"},
		{"another namespace", "c1", "http://loadtester-podinfo.other/", 502, "the fleet routes no Service loadtester-podinfo.other in cluster \"c1\" to the host (Fleet.RouteService)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pu, _ := url.Parse(proxy.URL)
			pu.User = url.UserPassword(tt.cluster, "fleet")
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, tt.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			b, _ := io.ReadAll(resp.Body)
			if diff := cmp.Diff([]any{tt.wantStatus, tt.wantBody}, []any{resp.StatusCode, string(b)}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestRouteServiceRefuses(t *testing.T) {
	f := &Fleet{Dir: t.TempDir(), Clusters: []Cluster{{Name: "c1"}}}
	if err := f.RouteService("c1", "demo", "x", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "no service proxy") {
		t.Errorf("without a proxy: %v", err)
	}
	f.ServiceProxy = "set"
	if err := f.RouteService("c9", "demo", "x", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), `no cluster "c9"`) {
		t.Errorf("unknown cluster: %v", err)
	}
	if err := f.RouteService("c1", "demo", "x", "nowhere"); err == nil {
		t.Error("a target without a port was accepted")
	}
}
