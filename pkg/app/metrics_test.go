package app

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
)

// recorder registers into a registry and remembers the metric names.
type recorder struct {
	prometheus.Registerer
	names []string
}

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := descName.FindStringSubmatch(d.String()); m != nil {
			r.names = append(r.names, m[1])
		}
	}
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// The README's metrics table lists exactly the metrics flotilla registers,
// in either mode.
func TestREADMEListsEveryMetric(t *testing.T) {
	var names []string
	for _, extra := range []string{"", fmt.Sprintf("  bus: {url: %q, stream: METRICS, partitions: 2, replica: m}\n", natsCluster.URL())} {
		reg := prometheus.NewRegistry()
		rec := &recorder{Registerer: reg}
		s, err := New(t.Context(), testConfig(t, extra), Options{Registry: reg, Registerer: rec, NoPrune: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		names = append(names, rec.names...)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile("(?s)### Metrics\n(.*?)\n\n").FindSubmatch(readme)
	if table == nil {
		t.Fatal("README has no ### Metrics table")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`(flotilla_[a-z_]+)").FindAllSubmatch(table[1], -1) {
		listed = append(listed, string(m[1]))
	}
	slices.Sort(listed)
	listed = slices.Compact(listed)
	registered := slices.Compact(slices.Sorted(slices.Values(names)))
	if diff := cmp.Diff(registered, listed); diff != "" {
		t.Errorf("README metrics (-registered +listed):\n%s", diff)
	}
}
