package features

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cucumber/godog"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/util/wait"
)

func (s *scenario) registerMetricsSteps(sc *godog.ScenarioContext) {
	sc.Step(`^flotilla's metrics report:$`, s.metricsReport)
}

// scrapeMetrics reads flotilla's GET /metrics.
func (s *scenario) scrapeMetrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.w.flotilla.url()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping flotilla's /metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping flotilla's /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// metricRow is one expectation of a metricsReport table: the series of
// metric with labels (`k="v",...`) has count observations (a histogram)
// or the value count (a counter or gauge), exactly or at least (">= n");
// a histogram's observations are above zero and, on average, under max
// seconds.
type metricRow struct {
	metric  string
	labels  map[string]string
	count   float64
	atLeast bool
	max     float64
}

func parseMetricRows(table *godog.Table) ([]metricRow, error) {
	if len(table.Rows) < 2 {
		return nil, errors.New("the table has no rows")
	}
	var out []metricRow
	for _, r := range table.Rows[1:] {
		if len(r.Cells) != 4 {
			return nil, fmt.Errorf("a row has %d cells, want metric | labels | count | max seconds", len(r.Cells))
		}
		row := metricRow{metric: r.Cells[0].Value, labels: map[string]string{}}
		for l := range strings.SplitSeq(r.Cells[1].Value, ",") {
			if l = strings.TrimSpace(l); l == "" {
				continue
			}
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				return nil, fmt.Errorf("label %q is not k=\"v\"", l)
			}
			row.labels[k] = strings.Trim(v, `"`)
		}
		c := strings.TrimSpace(r.Cells[2].Value)
		if rest, ok := strings.CutPrefix(c, ">="); ok {
			row.atLeast, c = true, strings.TrimSpace(rest)
		}
		var err error
		if row.count, err = strconv.ParseFloat(c, 64); err != nil {
			return nil, fmt.Errorf("count %q: %w", r.Cells[2].Value, err)
		}
		if m := strings.TrimSpace(r.Cells[3].Value); m != "" && m != "-" {
			if row.max, err = strconv.ParseFloat(m, 64); err != nil {
				return nil, fmt.Errorf("max seconds %q: %w", m, err)
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// check says what is wrong with the row's series in fams, "" if nothing.
func (r metricRow) check(fams map[string]*dto.MetricFamily) string {
	fam, ok := fams[r.metric]
	if !ok {
		return r.metric + " is not exported"
	}
	var count, sum float64
	var found bool
	for _, m := range fam.GetMetric() {
		if !seriesHas(m, r.labels) {
			continue
		}
		found = true
		switch {
		case m.GetHistogram() != nil:
			count += float64(m.GetHistogram().GetSampleCount())
			sum += m.GetHistogram().GetSampleSum()
		case m.GetCounter() != nil:
			count += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			count += m.GetGauge().GetValue()
		}
	}
	if !found {
		return fmt.Sprintf("%s has no series with %v", r.metric, r.labels)
	}
	if count < r.count || !r.atLeast && count != r.count {
		op := ""
		if r.atLeast {
			op = ">= "
		}
		return fmt.Sprintf("%s%v is %g, want %s%g", r.metric, r.labels, count, op, r.count)
	}
	if fam.GetType() == dto.MetricType_HISTOGRAM && count > 0 {
		if sum <= 0 {
			return fmt.Sprintf("%s%v: %g observations summing to %gs, want above zero", r.metric, r.labels, count, sum)
		}
		if r.max > 0 && sum/count > r.max {
			return fmt.Sprintf("%s%v: %g observations averaging %.3fs, want under %gs", r.metric, r.labels, count, sum/count, r.max)
		}
	}
	return ""
}

func seriesHas(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// metricsReport scrapes flotilla's /metrics until every row of the table
// holds (the delivery metrics follow the journal closely, not at once).
func (s *scenario) metricsReport(ctx context.Context, table *godog.Table) error {
	rows, err := parseMetricRows(table)
	if err != nil {
		return err
	}
	var wrong []string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		fams, err := s.scrapeMetrics(ctx)
		if err != nil {
			return false, err
		}
		wrong = wrong[:0]
		for _, r := range rows {
			if msg := r.check(fams); msg != "" {
				wrong = append(wrong, msg)
			}
		}
		return len(wrong) == 0, nil
	})
	if err != nil && len(wrong) > 0 {
		return fmt.Errorf("flotilla's metrics:\n  %s", strings.Join(wrong, "\n  "))
	}
	return err
}
