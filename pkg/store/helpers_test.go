package store_test

import (
	"path/filepath"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// openStore opens a store in a fresh temporary directory and closes it at the
// end of the test.
func openStore(tb testing.TB, opts ...store.Option) (*store.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "state", "flotilla.db")
	return openAt(tb, path, opts...), path
}

func openAt(tb testing.TB, path string, opts ...store.Option) *store.Store {
	tb.Helper()
	s, err := store.Open(path, opts...)
	if err != nil {
		tb.Fatalf("Open(%q): %v", path, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// newEvent builds a valid event with a small JSON payload.
func newEvent(id string) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetSource("/test")
	e.SetType("dev.flotilla.test")
	err := e.SetData(cloudevents.ApplicationJSON, map[string]string{"id": id})
	return e, err
}

func event(tb testing.TB, id string) cloudevents.Event {
	tb.Helper()
	e, err := newEvent(id)
	if err != nil {
		tb.Fatalf("building event %q: %v", id, err)
	}
	return e
}

func events(tb testing.TB, ids ...string) []cloudevents.Event {
	tb.Helper()
	evs := make([]cloudevents.Event, len(ids))
	for i, id := range ids {
		evs[i] = event(tb, id)
	}
	return evs
}

func idsOf(recs []store.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.Event.ID()
	}
	return ids
}

func seqsOf(recs []store.Record) []uint64 {
	seqs := make([]uint64, len(recs))
	for i, r := range recs {
		seqs[i] = r.Seq
	}
	return seqs
}
