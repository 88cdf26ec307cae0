package versionpolicy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/versionpolicy"
)

func TestNewestFirst(t *testing.T) {
	tests := []struct {
		name string
		tags []string
		n    int
		want []string
	}{
		{name: "semantic versions by precedence", tags: []string{"1.2.0", "1.10.0", "v1.9.1", "1.10.0-rc.1"}, n: 10, want: []string{"1.10.0", "1.10.0-rc.1", "v1.9.1", "1.2.0"}},
		{name: "the others after them, newest name first", tags: []string{"main-20260101", "1.0.0", "main-20261124", "latest"}, n: 10, want: []string{"1.0.0", "main-20261124", "main-20260101", "latest"}},
		{name: "at most n", tags: []string{"1.0.0", "2.0.0", "3.0.0"}, n: 2, want: []string{"3.0.0", "2.0.0"}},
		{name: "none", n: 5, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, versionpolicy.NewestFirst(tt.tags, tt.n)); diff != "" {
				t.Errorf("NewestFirst (-want +got):\n%s", diff)
			}
		})
	}
}
