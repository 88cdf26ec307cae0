package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
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

// An intact record that is not a readable event (an older version let it
// in) does not stop Read: it comes back with Err set, the records around it
// as usual, and its id still counts for de-duplication.
func TestReadReturnsAnUnreadableRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	l, err := openLog(JournalDir(path), defaultSegmentSize, slog.New(slog.DiscardHandler), func(*segment, uint64, string) {})
	if err != nil {
		t.Fatal(err)
	}
	encode := func(id string) []byte {
		t.Helper()
		b, err := testEvent(t, id).MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	unreadable := `{"specversion":"1.0","id":"bad","source":"/x","type":"t","time":"287396-10-12T08:59:00.993Z"}`
	err = l.append([]logRecord{
		{seq: 1, id: "a", raw: encode("a")},
		{seq: 2, id: "bad", raw: []byte(unreadable)},
		{seq: 3, id: "c", raw: encode("c")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatalf("Read = %v, want the unreadable record in the result", err)
	}
	var got []string
	for _, r := range recs {
		switch {
		case r.Err != nil && strings.Contains(r.Err.Error(), "event 2 ") && r.Event.ID() == "":
			got = append(got, fmt.Sprintf("%d: unreadable", r.Seq))
		case r.Err != nil:
			got = append(got, fmt.Sprintf("%d: %v, %s", r.Seq, r.Err, r.Event.ID()))
		default:
			got = append(got, fmt.Sprintf("%d: %s", r.Seq, r.Event.ID()))
		}
	}
	if diff := cmp.Diff([]string{"1: a", "2: unreadable", "3: c"}, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if recs, err := s.Read(t.Context(), 1, 1); err != nil || len(recs) != 1 || recs[0].Err == nil {
		t.Errorf("Read(1, 1) = %+v, %v; want the unreadable record", recs, err)
	}
	if added, err := s.Append(t.Context(), testEvent(t, "bad")); err != nil || len(added) != 0 {
		t.Errorf("Append of the unreadable record's id = %v, %v; want a duplicate", added, err)
	}
}
