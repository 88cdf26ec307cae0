package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func chartResults() *results {
	s := func(n string) *subject { return &subject{name: n} }
	return &results{
		clusters: 3,
		subjects: []*subject{s("flotilla"), s("Keel"), s("Flux, polling")},
		measures: []measure{
			{subject: "Keel", allSpec: 400 * time.Millisecond, allPrimary: 9 * time.Second},
			{subject: "flotilla", allSpec: 30 * time.Millisecond, allPrimary: 8 * time.Second},
			{subject: "Keel", allSpec: 500 * time.Millisecond, allPrimary: 10 * time.Second},
		},
	}
}

func TestChartColumns(t *testing.T) {
	want := []chartColumn{
		{name: "flotilla", spec: []float64{0.03}, primary: []float64{8}},
		{name: "Keel", spec: []float64{0.4, 0.5}, primary: []float64{9, 10}},
	}
	if diff := cmp.Diff(want, chartColumns(chartResults()), cmp.AllowUnexported(chartColumn{})); diff != "" {
		t.Errorf("chartColumns (-want +got):\n%s", diff)
	}
}

func TestWriteChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "docs", "peers.png")
	if err := writeChart(path, chartResults()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the chart is no PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 300 {
		t.Errorf("chart is %v", b)
	}
	if err := writeChart(path, &results{}); err == nil {
		t.Error("a chart of no push drawn")
	}
}
