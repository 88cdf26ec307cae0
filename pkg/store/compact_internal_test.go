package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// fakeClock is the clock of retention and the dedupe window in these tests.
type fakeClock struct{ t atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.t.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *fakeClock) add(d time.Duration) { c.t.Add(int64(d)) }
func (c *fakeClock) opt() Option         { return withBoundsClock(c.now) }
func idsOfRecords(recs []Record) (ids []string) {
	for _, r := range recs {
		ids = append(ids, r.Event.ID())
	}
	return ids
}

// appendN journals events id-0..id-(n-1), one Append each (so small
// segments fill one after the other).
func appendN(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.Append(t.Context(), testEvent(t, fmt.Sprintf("%s-%d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

func openCompacting(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	// Segments of ~3 records; no background compaction during the test.
	opts = append([]Option{WithSegmentSize(250), WithCompactInterval(time.Hour)}, opts...)
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Retention deletes the oldest segments once every consumer has passed them
// and they are older than the retention period, and nothing else: not what
// a consumer has yet to read, not the segment being written, nothing while
// no consumer has a cursor. Reads start at the first record kept; the
// numbering goes on, across a reopen.
func TestRetentionDeletesOldSegmentsBehindEveryCursor(t *testing.T) {
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s := openCompacting(t, path, clock.opt(), WithRetention(time.Hour))
	ctx := t.Context()
	appendN(t, s, "e", 20)
	segs := s.journal.segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}

	clock.add(2 * time.Hour)
	if r, err := s.Compact(ctx); err != nil || r.SegmentsDeleted != 0 {
		t.Fatalf("Compact without a consumer = %+v, %v; want nothing deleted", r, err)
	}
	if err := s.SetCursor(ctx, "functions", 20); err != nil {
		t.Fatal(err)
	}
	held := segs[2].first // the consumer "mirror" is inside segment 2
	if err := s.SetCursor(ctx, "mirror", held); err != nil {
		t.Fatal(err)
	}
	r, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := CompactReport{SegmentsDeleted: 2, EventsDeleted: segs[2].first - 1, IDsForgotten: r.IDsForgotten, First: segs[2].first, HeldBy: "mirror", HeldAt: held}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("Compact (-want +got):\n%s", diff)
	}
	recs, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 || recs[0].Seq != segs[2].first || recs[len(recs)-1].Seq != 20 {
		t.Fatalf("Read(0) = %v; want %d..20", idsOfRecords(recs), segs[2].first)
	}

	// The mirror catches up: everything but the segment being written goes.
	if err := s.SetCursor(ctx, "mirror", 20); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	last := s.journal.segments()
	if len(last) != 1 || last[0].last != 20 {
		t.Fatalf("after the consumers caught up: segments %+v, want the last one only", last)
	}
	first := s.FirstSeq()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openCompacting(t, path, clock.opt(), WithRetention(time.Hour))
	if s.FirstSeq() != first || s.LastSeq() != 20 {
		t.Errorf("reopened: records %d..%d, want %d..20", s.FirstSeq(), s.LastSeq(), first)
	}
	added, err := s.Append(ctx, testEvent(t, "next"))
	if err != nil || len(added) != 1 || added[0].Seq != 21 {
		t.Errorf("Append after reopening = %v, %v; want seq 21", added, err)
	}
}

// Segments younger than the retention period stay, consumed or not; 0
// keeps everything.
func TestRetentionKeepsYoungSegments(t *testing.T) {
	for _, retention := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint(retention), func(t *testing.T) {
			clock := newFakeClock()
			s := openCompacting(t, filepath.Join(t.TempDir(), "flotilla.db"), clock.opt(), WithRetention(retention))
			appendN(t, s, "e", 12)
			if err := s.SetCursor(t.Context(), "functions", 12); err != nil {
				t.Fatal(err)
			}
			clock.add(30 * time.Minute)
			if r, err := s.Compact(t.Context()); err != nil || r.SegmentsDeleted != 0 || s.FirstSeq() != 1 {
				t.Errorf("Compact = %+v, %v, first %d; want nothing deleted", r, err, s.FirstSeq())
			}
		})
	}
}

// A crash after the journal's new start was recorded and before its old
// segments were deleted: the next open deletes them. A segment missing
// where no retention deleted it is damage, and Open says so.
func TestOpenFinishesACompactionAndRefusesAMissingSegment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s := openCompacting(t, path)
	appendN(t, s, "e", 20)
	segs := s.journal.segments()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyJournalStart, seqKey(segs[2].first)) })
	if err2 := db.Close(); err != nil || err2 != nil {
		t.Fatal(err, err2)
	}
	s = openCompacting(t, path)
	if got := s.FirstSeq(); got != segs[2].first {
		t.Errorf("FirstSeq = %d, want %d", got, segs[2].first)
	}
	if n := len(s.journal.segments()); n != len(segs)-2 {
		t.Errorf("%d segments, want %d", n, len(segs)-2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Repair finds nothing to mend in a compacted journal.
	report, err := Repair(t.Context(), path)
	if err != nil || len(report.Replaced) != 0 || report.Kept != 20-segs[2].first+1 {
		t.Errorf("Repair = %+v, %v; want every record kept, no tombstone", report, err)
	}

	// Now the first segment left goes missing.
	if err := removeFile(segmentPath(JournalDir(path), segs[2].first)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, errCorrupt) {
		t.Errorf("Open with a missing segment = %v, want it refused as corrupt", err)
	}
}

// The dedupe index forgets the ids of segments written before the window,
// a segment at a time, never those of the segment being written; an event
// delivered again after that is journaled again. Reopening rebuilds only
// the window.
func TestDedupeWindowForgetsOldIDs(t *testing.T) {
	clock := newFakeClock()
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s := openCompacting(t, path, clock.opt(), WithDedupeWindow(time.Hour, 0))
	ctx := t.Context()
	appendN(t, s, "old", 8)
	clock.add(2 * time.Hour)
	appendN(t, s, "new", 8)
	r, err := s.Compact(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.IDsForgotten < 4 {
		t.Errorf("forgot %d ids, want those of the old segments", r.IDsForgotten)
	}
	for id, want := range map[string]bool{"old-0": false, "new-7": true} {
		if got, err := s.Has(ctx, id); got != want || err != nil {
			t.Errorf("Has(%s) = %v, %v; want %v", id, got, err, want)
		}
	}
	added, err := s.Append(ctx, testEvent(t, "old-0"), testEvent(t, "new-7"))
	if err != nil || len(added) != 1 || added[0].Event.ID() != "old-0" {
		t.Errorf("Append(old-0, new-7) = %v, %v; want old-0 again, new-7 a duplicate", idsOfRecords(added), err)
	}
	ids := s.DedupeIDs()
	segs := s.journal.segments()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The files' times are what real time would have made them.
	for _, seg := range segs {
		if err := os.Chtimes(segmentPath(JournalDir(path), seg.first), seg.written, seg.written); err != nil {
			t.Fatal(err)
		}
	}
	s = openCompacting(t, path, clock.opt(), WithDedupeWindow(time.Hour, 0))
	if got := s.DedupeIDs(); got != ids {
		t.Errorf("reopened with %d ids, want %d", got, ids)
	}
	if got, _ := s.Has(ctx, "old-1"); got {
		t.Error("reopened: Has(old-1) = true, want it outside the window")
	}
}

// At most maxEvents ids (and the rest of their oldest segment) are kept,
// the newest ones.
func TestDedupeWindowBoundsTheNumberOfIDs(t *testing.T) {
	s := openCompacting(t, filepath.Join(t.TempDir(), "flotilla.db"), WithDedupeWindow(time.Hour, 10))
	appendN(t, s, "e", 40)
	if _, err := s.Compact(t.Context()); err != nil {
		t.Fatal(err)
	}
	perSegment := int(s.journal.segments()[0].last)
	if got := s.DedupeIDs(); got < 10 || got >= 10+perSegment {
		t.Errorf("%d ids kept, want 10 to %d", got, 10+perSegment-1)
	}
	for id, want := range map[string]bool{"e-0": false, "e-39": true, "e-30": true} {
		if got, _ := s.Has(t.Context(), id); got != want {
			t.Errorf("Has(%s) = %v, want %v", id, got, want)
		}
	}
}

// A quiet journal rolls to a new segment on age, so retention and the
// window are not held up by a segment that never fills.
func TestJournalRollsOnAge(t *testing.T) {
	clock := newFakeClock()
	s := openCompacting(t, filepath.Join(t.TempDir(), "flotilla.db"), WithSegmentSize(1<<20), clock.opt(), WithDedupeWindow(time.Hour, 0))
	appendN(t, s, "a", 2)
	clock.add(10 * time.Minute)
	appendN(t, s, "b", 2)
	if n := len(s.journal.segments()); n != 1 {
		t.Fatalf("%d segments after 10 minutes, want 1", n)
	}
	clock.add(10 * time.Minute) // a quarter of the window has passed
	appendN(t, s, "c", 2)
	if n := len(s.journal.segments()); n != 2 {
		t.Errorf("%d segments after 20 minutes, want 2", n)
	}
}

// Reads go on while retention deletes segments under them (run with -race):
// a read sees records in order, from wherever the journal starts.
func TestReadsDuringRetention(t *testing.T) {
	clock := newFakeClock()
	s := openCompacting(t, filepath.Join(t.TempDir(), "flotilla.db"), clock.opt(), WithRetention(time.Minute))
	ctx := t.Context()
	appendN(t, s, "e", 60)
	if err := s.SetCursor(ctx, "functions", 60); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Hour)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				recs, err := s.Read(ctx, 0, 0)
				if err != nil {
					t.Error(err)
					return
				}
				for i := 1; i < len(recs); i++ {
					if recs[i].Seq != recs[i-1].Seq+1 {
						t.Errorf("read %d after %d", recs[i].Seq, recs[i-1].Seq)
						return
					}
				}
			}
		})
	}
	if _, err := s.Compact(ctx); err != nil {
		t.Error(err)
	}
	close(stop)
	wg.Wait()
	if s.FirstSeq() == 1 {
		t.Error("nothing was deleted")
	}
}

func removeFile(path string) error { return os.Remove(path) }
