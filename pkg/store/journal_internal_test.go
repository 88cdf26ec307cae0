package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

func testEvent(t *testing.T, id string) cloudevents.Event {
	t.Helper()
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetSource("/test")
	e.SetType("dev.flotilla.test")
	return e
}

// After a failed write or sync, what reached the disk is unknown: the store
// acknowledges nothing more until it is reopened, which recovers the log.
func TestJournalStopsAfterAWriteFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, testEvent(t, "a")); err != nil {
		t.Fatal(err)
	}
	// Inject the failure: the segment's file goes away under the writer.
	seg := s.journal.segs[0]
	if err := seg.f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, testEvent(t, "b")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Append with a failing disk = %v, want the write's error", err)
	}
	_, err = s.Append(ctx, testEvent(t, "c"))
	if err == nil || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Append after the failure = %v, want the journal stopped", err)
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("Err() = %v, want the journal stopped", err)
	}
	if got := s.LastSeq(); got != 1 {
		t.Errorf("LastSeq = %d, want 1", got)
	}
	seg.f, _ = os.Open(os.DevNull) // so Close has something to close
	_ = s.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.Err(); err != nil {
		t.Errorf("Err() after reopening = %v, want nil", err)
	}
	recs, err := s.Append(ctx, testEvent(t, "a"), testEvent(t, "c"))
	if err != nil || len(recs) != 1 || recs[0].Seq != 2 {
		t.Fatalf("Append after reopen = %v, %v; want c as 2", recs, err)
	}
}
