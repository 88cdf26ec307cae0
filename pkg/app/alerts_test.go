package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-cd/flotilla/pkg/testkit/fleettest"
)

const (
	dashboardFile = "../../deploy/grafana/flotilla-dashboard.json"
	alertsFile    = "../../deploy/manifests/prometheusrule.yaml"
)

// grafanaVars are the dashboard's variables, as Grafana would expand them.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$application", ".*")

// dashboardQueries returns every PromQL expression of the dashboard (its
// panels' targets) and the metrics its variables' label_values name.
func dashboardQueries(t *testing.T) (exprs, metrics []string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("reading %s: %v", dashboardFile, err)
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, grafanaVars.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),`)
	for _, v := range d.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			metrics = append(metrics, m[1])
		}
	}
	return exprs, metrics
}

// ruleGroups is the spec of the PrometheusRule: Prometheus's rule file
// format.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

func alertRules(t *testing.T) (ruleGroups, []byte) {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string          `json:"kind"`
		Spec json.RawMessage `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &pr); err != nil || pr.Kind != "PrometheusRule" {
		t.Fatalf("reading %s: a PrometheusRule? kind %q, %v", alertsFile, pr.Kind, err)
	}
	var g ruleGroups
	if err := json.Unmarshal(pr.Spec, &g); err != nil {
		t.Fatal(err)
	}
	return g, pr.Spec
}

// startPrometheus runs the local fleet's Prometheus scraping target (a
// host:port) every second, with rules as its rule file, and returns its URL.
func startPrometheus(t *testing.T, rules []byte, target string) string {
	t.Helper()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [rules.yml]
scrape_configs:
  - job_name: flotilla
    static_configs: [{targets: [%q]}]
`, target)
	return fleettest.Prometheus(t, cfg, map[string][]byte{"rules.yml": rules})
}

// getJSON GETs u and decodes its JSON body into v; a status other than 200
// is an error.
func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

// selectors collects the metric names of the selectors of a parsed
// query (Prometheus's /api/v1/parse_query tree).
func selectors(node any, out *[]string) {
	switch n := node.(type) {
	case map[string]any:
		if typ, _ := n["type"].(string); typ == "vectorSelector" || typ == "matrixSelector" {
			if name, _ := n["name"].(string); name != "" {
				*out = append(*out, name)
			}
		}
		for _, v := range n {
			selectors(v, out)
		}
	case []any:
		for _, v := range n {
			selectors(v, out)
		}
	}
}

// The Grafana dashboard and the PrometheusRule query only metrics
// flotilla registers; in a real Prometheus scraping a running flotilla,
// every expression parses and runs, every rule loads and evaluates
// healthy, and none fires.
func TestDashboardAndAlertsQueryRegisteredMetrics(t *testing.T) {
	groups, spec := alertRules(t)
	rulesYAML, err := yaml.JSONToYAML(spec)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg}
	s := runServer(t, testConfig(t, ""), Options{Registry: reg, Registerer: rec, NoPrune: true})
	prom := startPrometheus(t, rulesYAML, s.Addr())
	known := func(name string) bool {
		if slices.Contains(rec.names, name) {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(rec.names, base) {
				return true
			}
		}
		return false
	}

	exprs, varMetrics := dashboardQueries(t)
	if len(exprs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	var rules int
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			rules++
		}
	}
	for _, m := range varMetrics {
		if !known(m) {
			t.Errorf("a dashboard variable reads %s, which flotilla does not register", m)
		}
	}
	for _, q := range exprs {
		var parsed struct {
			Data any `json:"data"`
		}
		if err := getJSON(t.Context(), prom+"/api/v1/parse_query?query="+url.QueryEscape(q), &parsed); err != nil {
			t.Errorf("query does not parse: %s\n%v", q, err)
			continue
		}
		var names []string
		selectors(parsed.Data, &names)
		if len(names) == 0 && !strings.Contains(q, "vector(") { // a target line is a constant
			t.Errorf("query names no metric: %s", q)
		}
		for _, n := range names {
			if !known(n) {
				t.Errorf("query names %s, which flotilla does not register: %s", n, q)
			}
		}
	}

	// On a real, idle flotilla's metrics every query runs, and nothing
	// fires.
	var up struct {
		Data struct {
			Result []any `json:"result"`
		} `json:"data"`
	}
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := getJSON(ctx, prom+"/api/v1/query?query="+url.QueryEscape("flotilla_journal_writable"), &up)
		return err == nil && len(up.Data.Result) > 0, err
	})
	if err != nil {
		t.Fatalf("waiting for Prometheus to scrape flotilla: %v", err)
	}
	for _, q := range exprs {
		var res struct {
			Status string `json:"status"`
		}
		if err := getJSON(t.Context(), prom+"/api/v1/query?query="+url.QueryEscape(q), &res); err != nil || res.Status != "success" {
			t.Errorf("query fails on flotilla's metrics: %s\n%v %s", q, err, res.Status)
		}
	}

	// Every rule loaded and, evaluated, is healthy.
	var got struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name           string    `json:"name"`
					Health         string    `json:"health"`
					LastError      string    `json:"lastError"`
					LastEvaluation time.Time `json:"lastEvaluation"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	var problems []string
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := getJSON(ctx, prom+"/api/v1/rules", &got); err != nil {
			return false, err
		}
		problems = problems[:0]
		n := 0
		for _, g := range got.Data.Groups {
			for _, r := range g.Rules {
				n++
				if r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
					problems = append(problems, r.Name+": not evaluated yet")
				} else if r.Health != "ok" {
					problems = append(problems, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
				}
			}
		}
		if n != rules {
			problems = append(problems, fmt.Sprintf("Prometheus loaded %d rules, the file has %d", n, rules))
		}
		return len(problems) == 0, nil
	})
	if err != nil {
		t.Errorf("rules in Prometheus: %v %v", err, problems)
	}
	var alerts struct {
		Data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		} `json:"data"`
	}
	if err := getJSON(t.Context(), prom+"/api/v1/alerts", &alerts); err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts.Data.Alerts {
		t.Errorf("an idle flotilla has alert %s %s", a.Labels["alertname"], a.State)
	}
}
