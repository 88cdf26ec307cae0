package app

import (
	"fmt"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/dispatch"
)

// flotilla's own wiring starts in both modes: a function consuming a type
// that another consumes in another dispatch lane makes New fail ("the
// consumers of ... are in different lanes"), as the runner's consumption
// of cluster.succeeded once did in every scenario (#33 item 2). In
// scale-out mode the dispatchers start only with the partitions a replica
// takes, after New: New checks the lanes itself, and so does this test.
func TestDefaultWiringStarts(t *testing.T) {
	for _, tc := range []struct{ name, server string }{
		{"embedded", ""},
		{"scale-out", fmt.Sprintf("  bus: {url: %q, stream: LANES, partitions: 2, replica: a}\n", natsCluster.URL())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(t.Context(), testConfig(t, tc.server), Options{NoPrune: true})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if e, ok := s.dispatch.(*sharedEngine); ok {
				if err := dispatch.CheckLanes(e.fns); err != nil {
					t.Errorf("the scale-out engine's functions: %v", err)
				}
			} else if tc.server != "" {
				t.Errorf("scale-out mode's engine is a %T", s.dispatch)
			}
		})
	}
}
