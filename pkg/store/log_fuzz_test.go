package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSegmentRecovery feeds arbitrary bytes to the recovery of the last
// segment, as a crash or a damaged disk could leave it: it must not panic,
// must keep exactly the intact records at its start, in order, and must
// leave the file so that what it kept reads back and appends carry on. If
// an intact record follows the damage, it must refuse to open instead, and
// Repair must then keep the intact records, numbered as they were.
func FuzzSegmentRecovery(f *testing.F) {
	var valid []byte
	for i, id := range []string{"a", "bb", "ccc"} {
		valid = encodeRecord(valid, logRecord{seq: uint64(i + 1), id: id, raw: []byte(`{"id":"` + id + `"}`)})
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add(append(bytes.Clone(valid), "garbage"...))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4})
	second := bytes.Clone(valid) // record 2 damaged, 3 intact
	second[len(valid)/2] ^= 0xff
	f.Add(second)
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "flotilla.db")
		dir := JournalDir(path)
		if err := os.Mkdir(dir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.log"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		var ids []string
		l, err := openLog(dir, defaultSegmentSize, slog.New(slog.DiscardHandler), func(_ *segment, seq uint64, id string) {
			if seq != uint64(len(ids)+1) {
				t.Fatalf("record %d reported as %d", len(ids)+1, seq)
			}
			ids = append(ids, id)
		})
		if follows := intactRecordFollows(data); err != nil || follows {
			if !follows || !errors.Is(err, errCorrupt) {
				t.Fatalf("openLog = %v; an intact record follows the damage: %v", err, follows)
			}
			checkRepair(t, path, data)
			return
		}
		defer func() { _ = l.close() }()
		if l.lastSeq() != uint64(len(ids)) {
			t.Fatalf("lastSeq %d after %d records", l.lastSeq(), len(ids))
		}
		// What was kept is a prefix of the input, record for record.
		var kept []byte
		err = l.read(0, 0, func(seq uint64, raw []byte) error {
			kept = encodeRecord(kept, logRecord{seq: seq, id: ids[seq-1], raw: raw})
			return nil
		})
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if !bytes.HasPrefix(data, kept) {
			t.Fatalf("kept records are not the start of the segment")
		}
		next := uint64(len(ids) + 1)
		if err := l.append([]logRecord{{seq: next, id: "new", raw: []byte(`{}`)}}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
		n := 0
		if err := l.read(0, 0, func(uint64, []byte) error { n++; return nil }); err != nil || n != len(ids)+1 {
			t.Fatalf("after one append %d records (%v), want %d", n, err, len(ids)+1)
		}
	})
}

// intactRecordFollows is the naive reference of the scan-ahead rule: after
// the intact records at the start of data, is there an intact record,
// numbered from the next one on, at any offset where the damaged bytes
// before it leave room for its number?
func intactRecordFollows(data []byte) bool {
	off, next := 0, uint64(1)
	for {
		body, ok := nextRecord(data[off:], next)
		if !ok {
			break
		}
		off += recordHeader + len(body)
		next++
	}
	for p := off + 1; p+minRecord <= len(data); p++ {
		seq := binary.LittleEndian.Uint64(data[p+recordHeader:])
		if seq < next || seq-next > uint64((p-off)/minRecord) {
			continue
		}
		if _, ok := nextRecord(data[p:], seq); ok {
			return true
		}
	}
	return false
}

// checkRepair repairs the journal of the store at path, whose only segment
// held data: the intact records at its start must be kept as they were,
// and more records after them (what follows the damage).
func checkRepair(t *testing.T, path string, data []byte) {
	t.Helper()
	var prefix []byte
	n := uint64(0)
	for {
		body, ok := nextRecord(data[len(prefix):], n+1)
		if !ok {
			break
		}
		prefix = append(prefix, data[len(prefix):len(prefix)+recordHeader+len(body)]...)
		n++
	}
	report, err := Repair(t.Context(), path)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	if report.Kept <= n {
		t.Errorf("Repair kept %d records, %d tombstones; want the %d intact ones at the start and more", report.Kept, report.Tombstones(), n)
	}
	l, err := openLog(JournalDir(path), defaultSegmentSize, slog.New(slog.DiscardHandler), func(*segment, uint64, string) {})
	if err != nil {
		t.Fatalf("openLog after Repair: %v", err)
	}
	defer func() { _ = l.close() }()
	if l.lastSeq() != report.LastSeq {
		t.Errorf("lastSeq %d after Repair, which reports %d", l.lastSeq(), report.LastSeq)
	}
	seg, err := os.ReadFile(segmentPath(JournalDir(path), 1))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(seg, prefix) {
		t.Errorf("Repair did not keep the intact records at the start as they were")
	}
}
