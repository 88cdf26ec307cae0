package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCarries(t *testing.T) {
	const d = "sha256:0123"
	tests := []struct {
		img  string
		want bool
	}{
		{"127.0.0.1:5000/peers/keel-webhook:1.2.0", true},         // Keel writes the tag
		{"127.0.0.1:5000/peers/flotilla-waves@sha256:0123", true}, // flotilla the digest
		{"127.0.0.1:5000/peers/flotilla-waves:1.2.0@sha256:0123", true},
		{"127.0.0.1:5000/peers/keel-webhook:1.12.0", false},
		{"127.0.0.1:5000/peers/keel-webhook:1.2.0@sha256:4567", true}, // the tag, whatever the digest
		{"127.0.0.1:5000/peers/flotilla-waves@sha256:4567", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := carries(tt.img, "1.2.0", d); got != tt.want {
			t.Errorf("carries(%q) = %v, want %v", tt.img, got, tt.want)
		}
	}
}

func TestStatsOf(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		want stats
	}{
		{"none", nil, stats{}},
		{"odd", ms(30, 10, 20), stats{n: 3, median: 20 * time.Millisecond, min: 10 * time.Millisecond, max: 30 * time.Millisecond}},
		{"even", ms(40, 10, 20, 30), stats{n: 4, median: 25 * time.Millisecond, min: 10 * time.Millisecond, max: 40 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, statsOf(tt.in), cmp.AllowUnexported(stats{})); diff != "" {
				t.Errorf("statsOf (-want +got):\n%s", diff)
			}
		})
	}
}
