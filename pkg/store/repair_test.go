package store_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// Repair keeps every intact record under its sequence number and writes a
// tombstone for every damaged or missing one, so that the store opens again,
// cursors stay valid and appends carry on after the last number.
func TestRepairKeepsEveryIntactRecord(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name    string
		records int
		cursor  uint64
		segSize int64
		// damage damages the journal and returns the records replaced by
		// tombstones and where they were.
		damage     func(t *testing.T, j journal) (seqs []uint64, seg string, off int64)
		wantZeroed bool
		dropped    uint64 // records at the tail gone for good
	}{
		{
			name: "record 10 of 1000", records: 1000, cursor: 1000,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seg, off := j.damage(t, 10)
				return []uint64{10}, seg, off
			},
		},
		{
			name: "a record in a middle segment", records: 60, cursor: 20, segSize: 2048,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seq := j.middleSeq(t)
				seg, off := j.damage(t, seq)
				return []uint64{seq}, seg, off
			},
		},
		{
			name: "the end of a middle segment", records: 60, cursor: 60, segSize: 2048,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seg := segments(t, j.path)[1]
				offs := recordOffsets(t, seg)
				first := uint64(len(recordOffsets(t, segments(t, j.path)[0]))) + 1
				n := uint64(len(offs))
				// The last two records of the segment become zeros.
				off := offs[len(offs)-2]
				writeAt(t, seg, off, make([]byte, 2048))
				return []uint64{first + n - 2, first + n - 1}, seg, off
			},
		},
		{
			name: "a torn tail below the cursor", records: 5, cursor: 5,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seg, off := j.recordAt(t, 5)
				writeAt(t, seg, off+20, []byte("torn"))
				return []uint64{5}, seg, off
			},
			wantZeroed: true,
		},
		{
			name: "a torn tail above the cursor", records: 5, cursor: 4,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seg, off := j.recordAt(t, 5)
				writeAt(t, seg, off+20, []byte("torn"))
				return nil, seg, off
			},
			wantZeroed: true, dropped: 1,
		},
		{
			name: "bytes after the last record of a middle segment", records: 60, cursor: 60, segSize: 2048,
			damage: func(t *testing.T, j journal) ([]uint64, string, int64) {
				t.Helper()
				seg := segments(t, j.path)[1]
				end := j.segmentEnd(t, seg)
				writeAt(t, seg, end+3, []byte("junk"))
				return nil, seg, end
			},
			wantZeroed: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []store.Option{store.WithClock(func() time.Time { return now })}
			if tt.segSize > 0 {
				opts = append(opts, store.WithSegmentSize(tt.segSize))
			}
			j := newJournal(t, tt.records, tt.cursor, opts...)
			replaced, seg, off := tt.damage(t, j)
			damaged, err := os.ReadFile(seg)
			if err != nil {
				t.Fatal(err)
			}

			report, err := store.Repair(t.Context(), j.path, opts...)
			if err != nil {
				t.Fatalf("Repair: %v", err)
			}
			last := uint64(len(j.ids)) - tt.dropped
			if report.Kept != last-uint64(len(replaced)) || report.Tombstones() != uint64(len(replaced)) || report.LastSeq != last {
				t.Errorf("report: kept %d, tombstones %d, last %d; want %d, %d, %d (%+v)",
					report.Kept, report.Tombstones(), report.LastSeq, last-uint64(len(replaced)), len(replaced), last, report)
			}
			if (report.Zeroed > 0) != tt.wantZeroed {
				t.Errorf("report: %d bytes zeroed, want some: %v", report.Zeroed, tt.wantZeroed)
			}
			wantBackup := store.JournalDir(j.path) + ".damaged-20250304T050607Z"
			if report.Backup != wantBackup {
				t.Errorf("backup in %q, want %q", report.Backup, wantBackup)
			}
			if b, err := os.ReadFile(filepath.Join(wantBackup, filepath.Base(seg))); err != nil || !bytes.Equal(b, damaged) {
				t.Errorf("the backup does not hold the damaged segment as it was (%v)", err)
			}

			s := openAt(t, j.path, opts...)
			recs := readAll(t, s)
			want := map[uint64]bool{}
			for _, seq := range replaced {
				want[seq] = true
			}
			if len(recs) != int(last) {
				t.Fatalf("%d records after repair, want %d", len(recs), last)
			}
			for i, r := range recs {
				seq := uint64(i + 1)
				if r.Seq != seq || r.Err != nil {
					t.Fatalf("record %d: seq %d, err %v", i, r.Seq, r.Err)
				}
				if !want[seq] {
					if r.Event.ID() != j.ids[i] {
						t.Errorf("record %d is %q, want the original %q", seq, r.Event.ID(), j.ids[i])
					}
					continue
				}
				checkTombstone(t, r, filepath.Base(seg), off)
				if ok, err := s.Has(t.Context(), r.Event.ID()); !ok || err != nil {
					t.Errorf("Has(%q) = %v, %v; the id index lacks the tombstone", r.Event.ID(), ok, err)
				}
			}
			if c, err := s.Cursor(t.Context(), "runtime"); c != tt.cursor || err != nil {
				t.Errorf("cursor = %d, %v; want %d", c, err, tt.cursor)
			}
			added, err := s.Append(t.Context(), event(t, j.ids[0]), event(t, "after-repair"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]uint64{last + 1}, seqsOf(added)); diff != "" {
				t.Errorf("Append after repair (-want +got):\n%s", diff)
			}
		})
	}
}

func checkTombstone(t *testing.T, r store.Record, seg string, off int64) {
	t.Helper()
	e := r.Event
	if e.Type() != store.TypeJournalDamaged || e.Source() != store.TombstoneSource || e.ID() != fmt.Sprintf("damaged-%d", r.Seq) {
		t.Errorf("record %d is %s from %s, id %s; want a tombstone", r.Seq, e.Type(), e.Source(), e.ID())
	}
	var d store.Damaged
	if err := e.DataAs(&d); err != nil {
		t.Fatalf("tombstone %d: %v", r.Seq, err)
	}
	if d.Seq != r.Seq || d.Segment != seg || d.Offset != off || d.Reason == "" {
		t.Errorf("tombstone %d says %+v; want seq %d, segment %s, offset %d and a reason", r.Seq, d, r.Seq, seg, off)
	}
}

// An intact journal is left as it is.
func TestRepairLeavesAnIntactJournal(t *testing.T) {
	j := newJournal(t, 20, 20)
	before, err := os.ReadFile(segments(t, j.path)[0])
	if err != nil {
		t.Fatal(err)
	}
	report, err := store.Repair(t.Context(), j.path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.RepairReport{Kept: 20, LastSeq: 20}, report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	after, err := os.ReadFile(segments(t, j.path)[0])
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("the segment changed (%v)", err)
	}
}

// Repair fails while the store is open: flotilla must be stopped first.
func TestRepairRefusesAStoreInUse(t *testing.T) {
	s, path := openStore(t)
	if _, err := s.Append(t.Context(), event(t, "a")); err != nil {
		t.Fatal(err)
	}
	_, err := store.Repair(t.Context(), path, store.WithLockTimeout(50*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Repair of an open store = %v, want it in use", err)
	}
}

// A repair cut short between its two renames (the damaged journal moved
// aside, the repaired one not yet in place) leaves no journal: Open refuses
// to start, and running Repair again finishes the swap.
func TestRepairFinishesAnInterruptedSwap(t *testing.T) {
	j := newJournal(t, 50, 50)
	j.damage(t, 10)
	first, err := store.Repair(t.Context(), j.path)
	if err != nil {
		t.Fatal(err)
	}
	dir := store.JournalDir(j.path)
	if err := os.Rename(dir, dir+".repairing"); err != nil { // the state the crash left
		t.Fatal(err)
	}
	if _, err := store.Open(j.path); err == nil || !strings.Contains(err.Error(), "flotilla store repair") {
		t.Fatalf("Open without a journal = %v, want it refused", err)
	}
	report, err := store.Repair(t.Context(), j.path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.RepairReport{Kept: 50, LastSeq: 50}, report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if first.Backup == "" || !strings.HasPrefix(first.Backup, dir+".damaged-") {
		t.Errorf("the first repair's backup is %q", first.Backup)
	}
	s := openAt(t, j.path)
	recs := readAll(t, s)
	if len(recs) != 50 || recs[9].Event.Type() != store.TypeJournalDamaged || recs[10].Event.ID() != j.ids[10] {
		t.Errorf("%d records after finishing the swap, record 10 %s, 11 %s; want 50, a tombstone, the original", len(recs), recs[9].Event.Type(), recs[10].Event.ID())
	}
}

// Two repairs within a second keep both backups.
func TestRepairKeepsEveryBackup(t *testing.T) {
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	clock := store.WithClock(func() time.Time { return now })
	j := newJournal(t, 30, 30)
	var backups []string
	for _, seq := range []uint64{5, 20} {
		j.damage(t, seq)
		report, err := store.Repair(t.Context(), j.path, clock)
		if err != nil {
			t.Fatalf("repairing record %d: %v", seq, err)
		}
		backups = append(backups, report.Backup)
	}
	dir := store.JournalDir(j.path)
	if diff := cmp.Diff([]string{dir + ".damaged-20250304T050607Z", dir + ".damaged-20250304T050607Z-2"}, backups); diff != "" {
		t.Errorf("backups (-want +got):\n%s", diff)
	}
}
