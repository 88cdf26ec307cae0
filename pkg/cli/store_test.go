package cli

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

// damagedStore writes a store of n events in dataDir, the consumer
// "runtime" at the last, and flips a byte in the middle of record seq. It
// returns the segment's file name and the record's offset.
func damagedStore(t *testing.T, dataDir string, n int, seq uint64) (string, int64) {
	t.Helper()
	path := filepath.Join(dataDir, storeFile)
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 100 {
		var evs []cloudevents.Event
		for j := i; j < min(i+100, n); j++ {
			e := cloudevents.NewEvent()
			e.SetID(fmt.Sprintf("ev-%d", j+1))
			e.SetSource("/test")
			e.SetType("dev.flotilla.test")
			evs = append(evs, e)
		}
		if _, err := s.Append(t.Context(), evs...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetCursor(t.Context(), "runtime", uint64(n)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(store.JournalDir(path), "00000000000000000001.log")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var off int64
	for range seq - 1 {
		off += 8 + int64(binary.LittleEndian.Uint32(b[off:]))
	}
	b[off+30] ^= 0xff
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(seg), off
}

func TestStoreRepair(t *testing.T) {
	dir := t.TempDir()
	seg, off := damagedStore(t, dir, 1000, 10)
	path := filepath.Join(dir, storeFile)
	if _, err := store.Open(path); err == nil || !strings.Contains(err.Error(), "flotilla store repair --data-dir "+dir) {
		t.Fatalf("Open of the damaged store = %v, want the repair command", err)
	}

	code, stdout, stderr := run("store", "repair", "--data-dir", dir)
	if code != 0 {
		t.Fatalf("exit code %d, stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"kept:     999 intact records",
		"replaced: 1 damaged or missing records, by tombstones (" + store.TypeJournalDamaged + ")",
		fmt.Sprintf("record 10: segment %s, offset %d: damaged", seg, off),
		"appends continue at 1001",
		"kept in " + store.JournalDir(path) + ".damaged-",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("Open after repair: %v", err)
	}
	defer func() { _ = s.Close() }()
	recs, err := s.Read(t.Context(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Event.ID() != fmt.Sprintf("ev-%d", r.Seq) {
			got = append(got, fmt.Sprintf("%d %s %s", r.Seq, r.Event.ID(), r.Event.Type()))
		}
	}
	if diff := cmp.Diff([]string{"10 damaged-10 " + store.TypeJournalDamaged}, got); diff != "" || len(recs) != 1000 {
		t.Errorf("%d records; those not original (-want +got):\n%s", len(recs), diff)
	}
	if c, err := s.Cursor(t.Context(), "runtime"); c != 1000 || err != nil {
		t.Errorf("cursor = %d, %v; want 1000", c, err)
	}
	e := cloudevents.NewEvent()
	e.SetID("after")
	e.SetSource("/test")
	e.SetType("dev.flotilla.test")
	if added, err := s.Append(t.Context(), e); err != nil || len(added) != 1 || added[0].Seq != 1001 {
		t.Errorf("Append after repair = %v, %v; want seq 1001", added, err)
	}
}

func TestStoreRepair_intact(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, storeFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run("store", "repair", "--data-dir", dir)
	if code != 0 || !strings.Contains(stdout, "is intact") {
		t.Errorf("exit code %d, stdout %q, stderr %q; want the journal intact", code, stdout, stderr)
	}
}

func TestStoreRepair_badInvocation(t *testing.T) {
	code, _, stderr := run("store", "repair", "extra")
	if code != 2 || !strings.Contains(stderr, `unknown command "extra"`) { // a usage error, as every command's
		t.Errorf("exit code %d, stderr %q", code, stderr)
	}
	code, _, stderr = run("store", "repair", "--bogus")
	if code != 2 || !strings.Contains(stderr, "unknown flag: --bogus") {
		t.Errorf("exit code %d, stderr %q", code, stderr)
	}
}
