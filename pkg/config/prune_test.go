package config

import (
	"testing"

	"k8s.io/utils/ptr"
)

// source.git.prune is true unless set false; the example sets it (see
// TestExampleConfig), and the field reaches apply-manifests through
// pipelines.GitSource (pipelines/deliver's tests).
func TestGitSourcePrunes(t *testing.T) {
	for _, tc := range []struct {
		prune *bool
		want  bool
	}{{nil, true}, {ptr.To(true), true}, {ptr.To(false), false}} {
		if got := (GitSource{Prune: tc.prune}).Prunes(); got != tc.want {
			t.Errorf("Prunes() with prune %v = %t, want %t", tc.prune, got, tc.want)
		}
	}
}
