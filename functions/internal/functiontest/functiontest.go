package functiontest

import (
	"path/filepath"
	"slices"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/flotilla-cd/flotilla/events"
	"github.com/flotilla-cd/flotilla/pkg/state/embedded"
	"github.com/flotilla-cd/flotilla/pkg/store"
)

// NewRepo returns a rollout repository on a real store in a temporary
// directory, closed when the test ends.
func NewRepo(tb testing.TB) *embedded.Repo {
	tb.Helper()
	s, err := store.Open(filepath.Join(tb.TempDir(), "db"))
	if err != nil {
		tb.Fatalf("opening store: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("closing store: %v", err)
		}
	})
	return embedded.NewRepo(s, nil)
}

// Emitted is what a test compares of an emitted event: Data is its decoded
// payload.
type Emitted struct {
	ID, Type, RolloutID string
	Data                any
}

// Summarize checks that every event is valid and of one of the allowed
// types, and returns their summaries in order.
func Summarize(t *testing.T, evs []cloudevents.Event, allowed ...string) []Emitted {
	t.Helper()
	var got []Emitted
	for _, e := range evs {
		if err := e.Validate(); err != nil {
			t.Errorf("event %s is invalid: %v", e.ID(), err)
		}
		if !slices.Contains(allowed, e.Type()) {
			t.Fatalf("unexpected event type %s", e.Type())
		}
		data, err := events.DecodePayload(e)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, Emitted{e.ID(), e.Type(), events.RolloutID(e), data})
	}
	return got
}
