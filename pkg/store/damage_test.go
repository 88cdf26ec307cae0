package store_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// recordOffsets lists where the records of a segment start, walking their
// length prefixes up to the zeros after the last one.
func recordOffsets(t *testing.T, seg string) []int64 {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	for off := 0; off+8 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		if n == 0 {
			break
		}
		offs = append(offs, int64(off))
		off += 8 + n
	}
	return offs
}

// flipByte flips the bits of the byte at off of file.
func flipByte(t *testing.T, file string, off int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, file, off, []byte{^b[off]})
}

// journal is a store on disk with n events, the consumer "runtime" at
// cursor, closed again.
type journal struct {
	path string
	ids  []string
}

func newJournal(t *testing.T, n int, cursor uint64, opts ...store.Option) journal {
	t.Helper()
	j := journal{path: filepath.Join(t.TempDir(), "flotilla.db"), ids: nIDs("ev", n)}
	s, err := store.Open(j.path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	batch := 100 // a segment ends only after a batch: keep small ones small
	if n <= 100 {
		batch = 5
	}
	for i := 0; i < n; i += batch {
		if _, err := s.Append(t.Context(), events(t, j.ids[i:min(i+batch, n)]...)...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetCursor(t.Context(), "runtime", cursor); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return j
}

// recordAt returns the segment holding record seq and the record's offset.
func (j journal) recordAt(t *testing.T, seq uint64) (string, int64) {
	t.Helper()
	n := uint64(0)
	for _, seg := range segments(t, j.path) {
		offs := recordOffsets(t, seg)
		if seq <= n+uint64(len(offs)) {
			return seg, offs[seq-n-1]
		}
		n += uint64(len(offs))
	}
	t.Fatalf("no record %d", seq)
	return "", 0
}

// middleSeq is the seq of the second record of the second segment, of
// three or more.
func (j journal) middleSeq(t *testing.T) uint64 {
	t.Helper()
	segs := segments(t, j.path)
	if len(segs) < 3 || len(recordOffsets(t, segs[1])) < 3 {
		t.Fatalf("%d segments, want at least 3 of 3 records or more", len(segs))
	}
	return uint64(len(recordOffsets(t, segs[0]))) + 2
}

// segmentEnd returns where the records of seg end.
func (j journal) segmentEnd(t *testing.T, seg string) int64 {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	offs := recordOffsets(t, seg)
	last := offs[len(offs)-1]
	return last + 8 + int64(binary.LittleEndian.Uint32(b[last:]))
}

// damage flips a byte in the middle of record seq.
func (j journal) damage(t *testing.T, seq uint64) (string, int64) {
	t.Helper()
	seg, off := j.recordAt(t, seq)
	flipByte(t, seg, off+30)
	return seg, off
}

// A damaged record with intact records after it is not a torn write: the
// store refuses to open, naming the segment, the offset, the record and the
// repair command, rather than zero everything after it.
func TestOpenRefusesDamageBeforeIntactRecords(t *testing.T) {
	flip := func(t *testing.T, seg string, off int64) {
		t.Helper()
		flipByte(t, seg, off+30)
	}
	tests := []struct {
		name    string
		records int
		segSize int64
		seq     func(t *testing.T, j journal) uint64 // the record damaged
		damage  func(t *testing.T, seg string, off int64)
		want    string // beyond the segment, offset, record and repair command
	}{
		{
			name: "record 10 of 1000 in the last segment", records: 1000,
			seq:    func(*testing.T, journal) uint64 { return 10 },
			damage: flip, want: "intact records follow",
		},
		{
			name: "a record in a middle segment", records: 60, segSize: 2048,
			seq: middleSeq, damage: flip, want: "intact records follow",
		},
		{
			name: "the length of a record in a middle segment", records: 60, segSize: 2048,
			seq: middleSeq,
			damage: func(t *testing.T, seg string, off int64) {
				t.Helper()
				writeAt(t, seg, off, []byte{0xff, 0xff, 0, 0})
			},
			want: "intact records follow",
		},
		{
			name: "the last record of a middle segment", records: 60, segSize: 2048,
			seq: func(t *testing.T, j journal) uint64 {
				t.Helper()
				segs := segments(t, j.path)
				if len(segs) < 3 {
					t.Fatalf("%d segments, want at least 3", len(segs))
				}
				return uint64(len(recordOffsets(t, segs[0])) + len(recordOffsets(t, segs[1])))
			},
			damage: flip, want: "the next segment starts at record",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []store.Option
			if tt.segSize > 0 {
				opts = append(opts, store.WithSegmentSize(tt.segSize))
			}
			j := newJournal(t, tt.records, 5, opts...)
			seq := tt.seq(t, j)
			seg, off := j.recordAt(t, seq)
			tt.damage(t, seg, off)
			_, err := store.Open(j.path, opts...)
			if err == nil {
				t.Fatal("Open of a damaged journal succeeded")
			}
			for _, w := range []string{
				filepath.Base(seg),
				fmt.Sprintf("record %d at offset %d", seq, off),
				"flotilla store repair --data-dir " + filepath.Dir(j.path),
				tt.want,
			} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Damage after the last record of a segment that the log has moved on from
// is no torn write either (a crash tears only the last segment): refused.
func TestOpenRefusesDamageAfterAMiddleSegment(t *testing.T) {
	j := newJournal(t, 60, 5, store.WithSegmentSize(2048))
	seg := segments(t, j.path)[1]
	end := j.segmentEnd(t, seg)
	writeAt(t, seg, end+3, []byte("junk"))
	_, err := store.Open(j.path, store.WithSegmentSize(2048))
	if err == nil {
		t.Fatal("Open of a damaged journal succeeded")
	}
	for _, w := range []string{
		filepath.Base(seg),
		fmt.Sprintf("damaged bytes at offset %d", end),
		"flotilla store repair --data-dir " + filepath.Dir(j.path),
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open error %q does not say %q", err, w)
		}
	}
}

// Sequence numbers are never handed out twice: a journal that ends below a
// consumer's cursor (here, its last two records were lost) is refused.
func TestOpenRefusesAJournalBelowACursor(t *testing.T) {
	j := newJournal(t, 5, 5)
	seg, off := j.recordAt(t, 4)
	fi, err := os.Stat(seg)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, seg, off, make([]byte, fi.Size()-off))
	_, err = store.Open(j.path)
	if err == nil {
		t.Fatal("Open of a journal below a cursor succeeded")
	}
	for _, w := range []string{`"runtime"`, "cursor 5", "ends at record 3", "flotilla store repair --data-dir " + filepath.Dir(j.path)} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open error %q does not say %q", err, w)
		}
	}
}

// A torn write at the tail is still recovered automatically, and the store
// says so in its log.
func TestOpenZeroesATornTailAndLogsIt(t *testing.T) {
	j := newJournal(t, 5, 4)
	seg, off := j.recordAt(t, 5)
	writeAt(t, seg, off+20, []byte("torn"))
	var logs bytes.Buffer
	s := openAt(t, j.path, store.WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))))
	if diff := cmp.Diff(j.ids[:4], idsOf(readAll(t, s))); diff != "" {
		t.Errorf("journal after a torn tail (-want +got):\n%s", diff)
	}
	var warned bool
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Level   string
			Msg     string
			Segment string
			Offset  int64
			Bytes   int64
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Level == "WARN" && strings.Contains(rec.Msg, "torn") {
			warned = true
			if rec.Segment != seg || rec.Offset != off || rec.Bytes <= 0 {
				t.Errorf("warning %q: want segment %s, offset %d and the bytes zeroed", line, seg, off)
			}
		}
	}
	if !warned {
		t.Errorf("no warning about the torn tail in the log:\n%s", logs.String())
	}
}

// Open streams the segments: what it allocates does not grow with their
// size (it used to read each one whole).
func TestOpenStreamsSegments(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 16<<10)
	for b := range 10 {
		evs := make([]cloudevents.Event, 256)
		for i := range evs {
			evs[i] = cloudevents.NewEvent()
			evs[i].SetID(fmt.Sprintf("big-%d-%d", b, i))
			evs[i].SetSource("/test")
			evs[i].SetType("dev.flotilla.test")
			if err := evs[i].SetData(cloudevents.ApplicationJSON, map[string]string{"pad": pad}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Append(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, path)
	fi, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 1 || fi.Size() < 32<<20 {
		t.Fatalf("%d segments, the first of %d bytes; want one of over 32 MiB", len(segs), fi.Size())
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s = openAt(t, path)
	runtime.ReadMemStats(&after)
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("Open allocated %d bytes for a segment of %d", got, fi.Size())
	if got > uint64(fi.Size()/4) {
		t.Errorf("Open allocated %d bytes for a segment of %d; want under a quarter of it", got, fi.Size())
	}
	if got := s.LastSeq(); got != 2560 {
		t.Errorf("LastSeq = %d, want 2560", got)
	}
}

// middleSeq is the seq of a record in the middle segment of j.
func middleSeq(t *testing.T, j journal) uint64 {
	t.Helper()
	return j.middleSeq(t)
}
