package store_test

import (
	"fmt"
	"path/filepath"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// openStore opens a store in a fresh temporary directory and closes it at the
// end of the test.
func openStore(t testing.TB, opts ...store.Option) (*store.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state", "flotilla.db")
	return openAt(t, path, opts...), path
}

func openAt(t testing.TB, path string, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
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

func event(t testing.TB, id string) cloudevents.Event {
	t.Helper()
	e, err := newEvent(id)
	if err != nil {
		t.Fatalf("building event %q: %v", id, err)
	}
	return e
}

func events(t testing.TB, ids ...string) []cloudevents.Event {
	t.Helper()
	evs := make([]cloudevents.Event, len(ids))
	for i, id := range ids {
		evs[i] = event(t, id)
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

func numberedIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return ids
}
