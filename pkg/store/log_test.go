package store_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// ids builds n distinct ids.
func nIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return ids
}

func segments(tb testing.TB, path string) []string {
	tb.Helper()
	m, err := filepath.Glob(filepath.Join(store.JournalDir(path), "*.log"))
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func readAll(tb testing.TB, s *store.Store) []store.Record {
	tb.Helper()
	recs, err := s.Read(tb.Context(), 0, 0)
	if err != nil {
		tb.Fatalf("Read: %v", err)
	}
	return recs
}

func TestJournalSpansSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	ids := nIDs("ev", 60)
	s, err := store.Open(path, store.WithSegmentSize(2048))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(ids); i += 7 {
		if _, err := s.Append(t.Context(), events(t, ids[i:min(i+7, len(ids))]...)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, path)); n < 3 {
		t.Fatalf("%d segments, want several of 2 KiB", n)
	}

	s = openAt(t, path, store.WithSegmentSize(2048))
	if diff := cmp.Diff(ids, idsOf(readAll(t, s))); diff != "" {
		t.Errorf("journal after reopen (-want +got):\n%s", diff)
	}
	// Every window of every size reads back the same records.
	for after := range uint64(len(ids)) {
		for _, limit := range []int{1, 5, 13} {
			recs, err := s.Read(t.Context(), after, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := ids[after:min(int(after)+limit, len(ids))]
			if diff := cmp.Diff(want, idsOf(recs)); diff != "" {
				t.Fatalf("Read(%d, %d) (-want +got):\n%s", after, limit, diff)
			}
			if len(recs) > 0 && recs[0].Seq != after+1 {
				t.Fatalf("Read(%d, %d) starts at %d", after, limit, recs[0].Seq)
			}
		}
	}
	added, err := s.Append(t.Context(), events(t, ids[3], "new")...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{61}, seqsOf(added)); diff != "" {
		t.Errorf("Append after reopen (-want +got):\n%s", diff)
	}
}

// A crash in the middle of a write leaves part of a record (or garbage) at
// the tail: it was never acknowledged, so the journal ends before it, and
// appends carry on from there.
func TestJournalRecoversFromATornTail(t *testing.T) {
	tests := []struct {
		name string
		tear func(t *testing.T, seg string, size int64)
	}{
		{"half a record", func(t *testing.T, seg string, size int64) {
			t.Helper()
			// The last record loses its second half.
			writeAt(t, seg, size-40, make([]byte, 40))
		}},
		{"garbage after the last record", func(t *testing.T, seg string, size int64) {
			t.Helper()
			writeAt(t, seg, size, []byte("\x52\x00\x00\x00garbage that is no record"))
		}},
		{"a flipped bit", func(t *testing.T, seg string, size int64) {
			t.Helper()
			b, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}
			writeAt(t, seg, size-5, []byte{b[size-5] ^ 0x10})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "flotilla.db")
			s, err := store.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append(t.Context(), events(t, "a", "b")...); err != nil {
				t.Fatal(err)
			}
			size, err := s.Size()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			seg := segments(t, path)[0]
			tt.tear(t, seg, size-fi.Size())

			s = openAt(t, path)
			want := []string{"a", "b"}
			if tt.name != "garbage after the last record" {
				want = []string{"a"}
			}
			if diff := cmp.Diff(want, idsOf(readAll(t, s))); diff != "" {
				t.Fatalf("journal after the tear (-want +got):\n%s", diff)
			}
			if _, err := s.Append(t.Context(), events(t, "b", "c")...); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a", "b", "c"}, idsOf(readAll(t, s))); diff != "" {
				t.Errorf("journal after appending (-want +got):\n%s", diff)
			}
		})
	}
}

func writeAt(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// Damage anywhere but the tail is not a crash: the store refuses to open
// rather than drop what follows.
func TestJournalRefusesACorruptSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path, store.WithSegmentSize(1024))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range nIDs("ev", 30) {
		if _, err := s.Append(t.Context(), event(t, id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, path)
	if len(segs) < 2 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	writeAt(t, segs[0], 20, []byte("XX"))
	_, err = store.Open(path)
	if err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), filepath.Base(segs[0])) {
		t.Fatalf("Open = %v, want an error naming the corrupt segment", err)
	}
}

// Stores written before the event log kept the journal in the state file
// (events: seq -> event, event_id_log: seq -> id). Opening one moves the
// journal into the log with its sequence numbers, once.
func TestOpenMovesAnOlderJournalIntoTheLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	old := nIDs("old", 10)
	err = db.Update(func(tx *bolt.Tx) error {
		evs, err := tx.CreateBucket([]byte("events"))
		if err != nil {
			return err
		}
		idLog, err := tx.CreateBucket([]byte("event_id_log"))
		if err != nil {
			return err
		}
		cursors, err := tx.CreateBucket([]byte("cursors"))
		if err != nil {
			return err
		}
		for _, id := range old {
			raw, err := json.Marshal(event(t, id))
			if err != nil {
				return err
			}
			seq, _ := evs.NextSequence()
			key := binary.BigEndian.AppendUint64(nil, seq)
			if err := errors.Join(evs.Put(key, raw), idLog.Put(key, []byte(id))); err != nil {
				return err
			}
		}
		return cursors.Put([]byte("runtime"), binary.BigEndian.AppendUint64(nil, 4))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 { // the second open finds nothing left to move
		s, err := store.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		recs := readAll(t, s)
		if diff := cmp.Diff(old, idsOf(recs)); diff != "" {
			t.Errorf("journal (-want +got):\n%s", diff)
		}
		if got := seqsOf(recs); len(got) != len(old) || got[0] != 1 || got[len(got)-1] != 10 {
			t.Errorf("seqs %v, want 1..10", got)
		}
		if c, err := s.Cursor(t.Context(), "runtime"); c != 4 || err != nil {
			t.Errorf("cursor = %d, %v; want 4", c, err)
		}
		if got, err := s.Append(t.Context(), event(t, old[2])); len(got) != 0 || err != nil {
			t.Errorf("re-appending a moved id = %v, %v; want a duplicate", got, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	_ = db.View(func(tx *bolt.Tx) error {
		for _, name := range []string{"events", "event_id_log"} {
			if tx.Bucket([]byte(name)) != nil {
				t.Errorf("bucket %s is still in the state file", name)
			}
		}
		return nil
	})
}

// UpdateAndAppend commits the document with its events in the outbox; a
// crash before the journal has them leaves them there, and the next open
// journals them (skipping those the journal has) and empties the outbox.
func TestOpenJournalsTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(t.Context(), event(t, "journaled")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a crash right after the document's commit leaves behind.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket([]byte("outbox"))
		for _, id := range []string{"journaled", "pending-1", "pending-2"} {
			raw, err := json.Marshal(event(t, id))
			if err != nil {
				return err
			}
			seq, _ := out.NextSequence()
			if err := out.Put(binary.BigEndian.AppendUint64(nil, seq), raw); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"journaled", "pending-1", "pending-2"}, idsOf(readAll(t, s))); diff != "" {
		t.Errorf("journal (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := outboxLen(t, path); n != 0 {
		t.Errorf("outbox has %d entries after open, want 0", n)
	}
}

// A clean run leaves an empty outbox behind.
func TestUpdateAndAppendEmptiesTheOutbox(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for i := range 3 {
		_, err := s.UpdateAndAppend(t.Context(), "docs", "k", &n, func(bool) ([]cloudevents.Event, error) {
			n++
			return events(t, fmt.Sprintf("e%d", i)), nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := outboxLen(t, path); n != 0 {
		t.Errorf("outbox has %d entries after Close, want 0", n)
	}
}

func outboxLen(t *testing.T, path string) int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	n := 0
	_ = db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte("outbox")).Stats().KeyN
		return nil
	})
	return n
}

// The commit delay only applies while appends contend: one caller at a time
// never waits for it (here it would wait an hour).
func TestIdleStoreDoesNotWaitForTheCommitDelay(t *testing.T) {
	s, _ := openStore(t, store.WithCommitDelay(time.Hour))
	done := make(chan error, 1)
	go func() {
		for _, id := range nIDs("serial", 20) {
			if _, err := s.Append(t.Context(), event(t, id)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serial appends waited for the commit delay")
	}
}
