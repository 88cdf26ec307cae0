package store_test

import (
	"path/filepath"
	"testing"

	"github.com/flotilla-cd/flotilla/pkg/bus"
	"github.com/flotilla-cd/flotilla/pkg/bus/bustest"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// The store is the embedded adapter of the bus port.
func TestBusContract(t *testing.T) {
	bustest.Run(t, func(t *testing.T) (bus.Bus, func() bus.Bus) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "flotilla.db")
		s, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		restart := func() bus.Bus {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = store.Open(path); err != nil {
				t.Fatal(err)
			}
			return s
		}
		return s, restart
	})
}
