package meshmetrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	flaggerv1 "github.com/fluxcd/flagger/pkg/apis/flagger/v1beta1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

// TestFlaggerQueries runs each provider's built-in request-success-rate and
// request-duration queries, read from Flagger's own source (the version in
// go.mod) and rendered as Flagger renders them, against a real Prometheus
// scraping the exporter: each returns the success rate and latency the
// workload was set to. A series misnamed or mislabelled for one provider
// makes its query return nothing.
func TestFlaggerQueries(t *testing.T) {
	e, err := Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	// 50ms is the top of a bucket of every provider's histogram but
	// Traefik's (0.1s), so the 99th percentile estimated is just under it.
	e.Set(Workload{Namespace: "demo", Name: "podinfo"}, Traffic{RequestsPerSecond: 20, SuccessRate: 0.9, Latency: 50 * time.Millisecond})
	// Another workload, failing, which no query of podinfo's may read.
	e.Set(Workload{Namespace: "demo", Name: "podinfo-other"}, Traffic{SuccessRate: 0.1, Latency: 5 * time.Second})
	e.Set(Workload{Namespace: "other", Name: "podinfo"}, Traffic{SuccessRate: 0.1, Latency: 5 * time.Second})
	prom := startPrometheus(t, e.Addr())

	model := flaggerv1.MetricTemplateModel{Name: "podinfo", Namespace: "demo", Target: "podinfo",
		Service: "podinfo", Ingress: "podinfo", Route: "podinfo", Interval: "30s"}
	tests := []struct {
		provider, file, queries string
		// msPerUnit turns the duration query's value into milliseconds,
		// as the observer does.
		msPerUnit    float64
		wantDuration float64 // ms
	}{
		{provider: "istio", file: "istio.go", queries: "istioQueries", msPerUnit: 1, wantDuration: 49.75},
		{provider: "kubernetes, gatewayapi", file: "http.go", queries: "httpQueries", msPerUnit: 1000, wantDuration: 49.75},
		{provider: "linkerd", file: "linkerd.go", queries: "linkerdQueries", msPerUnit: 1, wantDuration: 49.9},
		{provider: "contour", file: "contour.go", queries: "contourQueries", msPerUnit: 1, wantDuration: 49.75},
		{provider: "traefik", file: "traefik.go", queries: "traefikQueries", msPerUnit: 1, wantDuration: 99},
		{provider: "kuma", file: "kuma.go", queries: "kumaQueries", msPerUnit: 1, wantDuration: 49.75},
		{provider: "nginx", file: "nginx.go", queries: "nginxQueries", msPerUnit: 1, wantDuration: 50},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			q := flaggerQueries(t, tt.file, tt.queries)
			rate, ok := query(t, prom, render(t, q["request-success-rate"], model), 1, 90)
			if !ok {
				t.Errorf("request-success-rate = %v, want 90", rate)
			}
			d, ok := query(t, prom, render(t, q["request-duration"], model), tt.msPerUnit, tt.wantDuration)
			if !ok {
				t.Errorf("request-duration = %vms, want %vms", d, tt.wantDuration)
			}
		})
	}
}

// flaggerQueries reads the map of queries named name in Flagger's
// pkg/metrics/observers/file.
func flaggerQueries(t *testing.T, file, name string) map[string]string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Dir}}", "github.com/fluxcd/flagger").Output()
	if err != nil {
		t.Fatalf("finding Flagger's module: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "pkg", "metrics", "observers", file)
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != name || len(vs.Values) != 1 {
			return true
		}
		for _, el := range vs.Values[0].(*ast.CompositeLit).Elts {
			kv := el.(*ast.KeyValueExpr)
			k, err1 := strconv.Unquote(kv.Key.(*ast.BasicLit).Value)
			v, err2 := strconv.Unquote(kv.Value.(*ast.BasicLit).Value)
			if err1 != nil || err2 != nil {
				t.Fatalf("%s in %s: %v %v", name, path, err1, err2)
			}
			queries[k] = v
		}
		return false
	})
	if queries["request-success-rate"] == "" || queries["request-duration"] == "" {
		t.Fatalf("%s has no %s with both built-in queries: %v", path, name, queries)
	}
	return queries
}

// render fills a query's template as Flagger's observers.RenderQuery does.
func render(t *testing.T, q string, m flaggerv1.MetricTemplateModel) string {
	t.Helper()
	tmpl, err := template.New("tmpl").Option("missingkey=error").Funcs(m.TemplateFunctions()).Parse(q)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, nil); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// query waits until q has a single value which, times unit, is within 0.5
// of want, and returns it times unit and whether it came there. Just after
// the first scrapes the window holds a few dozen requests counted in whole
// numbers, and the value is off by a few percent until it fills; a query
// reading the wrong series never comes within 0.5.
func query(t *testing.T, prom, q string, unit, want float64) (float64, bool) {
	t.Helper()
	var v float64
	seen := false
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var r struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value []any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, prom+"/api/v1/query?query="+url.QueryEscape(q), nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		defer func() { _ = resp.Body.Close() }()
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return false, err
		}
		last = fmt.Sprintf("%s %v", r.Status, r.Data.Result)
		if r.Status != "success" || len(r.Data.Result) != 1 || len(r.Data.Result[0].Value) != 2 {
			return false, nil
		}
		s, _ := r.Data.Result[0].Value[1].(string)
		v, err = strconv.ParseFloat(s, 64)
		// NaN until two scrapes of a counter that moved.
		if err != nil || math.IsNaN(v) {
			return false, nil
		}
		seen, v = true, v*unit
		return math.Abs(v-want) <= 0.5, nil
	})
	if !seen {
		t.Fatalf("%s: %v (last answer: %s)", q, err, last)
	}
	return v, err == nil
}

// startPrometheus runs the local fleet's Prometheus scraping target (a
// host:port) every second and returns its URL.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: mesh
    honor_labels: true
    static_configs: [{targets: [%q]}]
`, target)
	return fleettest.Prometheus(t, cfg, nil)
}
