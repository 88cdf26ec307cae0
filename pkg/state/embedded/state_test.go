package embedded_test

import (
	"path/filepath"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/state"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/state/statetest"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// The Repo on the store is the embedded adapter of the state port.
func TestStateContract(t *testing.T) {
	statetest.Run(t, func(t *testing.T) (state.Rollouts, bus.Bus) {
		t.Helper()
		s, err := store.Open(filepath.Join(t.TempDir(), "flotilla.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return embedded.NewRepo(s, nil), s
	})
}
