package store_test

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/flotilla-cd/flotilla/pkg/store"
)

func TestOpenCreatesParentDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "flotilla.db")
	s := openAt(t, path)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("store file: %v", err)
	}
	size, err := s.Size()
	if err != nil || size <= 0 {
		t.Errorf("Size = %d, %v; want > 0", size, err)
	}
}

func TestOpenWhileInUse(t *testing.T) {
	_, path := openStore(t)
	start := time.Now()
	s2, err := store.Open(path, store.WithLockTimeout(200*time.Millisecond))
	if err == nil {
		_ = s2.Close()
		t.Fatal("second Open succeeded, want error")
	}
	want := "store \"" + path + "\" is in use by another flotilla"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error = %q, want it to contain %q", err, want)
	}
	if !errors.Is(err, bolterrors.ErrTimeout) {
		t.Errorf("error %v does not wrap bbolt's ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second Open took %v", d)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flotilla.db")
	ctx := t.Context()

	s, err := store.Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := s.Append(ctx, events(t, "a", "b", "c")...); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.SetCursor(ctx, "router", 2); err != nil {
		t.Fatalf("SetCursor: %v", err)
	}
	if err := s.Put(ctx, "rollouts", "r1", rollout{ID: "r1", Wave: 3}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openAt(t, path)
	if got := s.LastSeq(); got != 3 {
		t.Errorf("LastSeq after reopen = %d, want 3", got)
	}
	recs, err := s.Read(ctx, 0, 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, idsOf(recs)); diff != "" {
		t.Errorf("journal after reopen (-want +got):\n%s", diff)
	}
	if got, err := s.Cursor(ctx, "router"); err != nil || got != 2 {
		t.Errorf("Cursor after reopen = %d, %v; want 2", got, err)
	}
	var r rollout
	if found, err := s.Get(ctx, "rollouts", "r1", &r); err != nil || !found || r.Wave != 3 {
		t.Errorf("Get after reopen = %+v, %v, %v", r, found, err)
	}

	// Ids journaled before the restart are still de-duplicated, and numbering
	// carries on.
	added, err := s.Append(ctx, events(t, "b", "d")...)
	if err != nil {
		t.Fatalf("Append after reopen: %v", err)
	}
	if diff := cmp.Diff([]string{"d"}, idsOf(added)); diff != "" {
		t.Errorf("Append after reopen returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint64{4}, seqsOf(added)); diff != "" {
		t.Errorf("seq after reopen (-want +got):\n%s", diff)
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	now := time.Unix(0, 0)
	clock := func() time.Time { // every reading is 3ms after the previous one
		now = now.Add(3 * time.Millisecond)
		return now
	}
	path := filepath.Join(t.TempDir(), "flotilla.db")
	s, err := store.Open(path, store.WithMetrics(reg), store.WithClock(clock))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ctx := t.Context()
	if _, err := s.Append(ctx, events(t, "a", "b", "a")...); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if _, err := s.Append(ctx, events(t, "b", "c")...); err != nil {
		t.Fatalf("Append: %v", err)
	}

	const want = `
# HELP flotilla_journal_duplicates_total Events not appended because their id was already journaled.
# TYPE flotilla_journal_duplicates_total counter
flotilla_journal_duplicates_total 2
# HELP flotilla_journal_events_total Events appended to the journal.
# TYPE flotilla_journal_events_total counter
flotilla_journal_events_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"flotilla_journal_events_total", "flotilla_journal_duplicates_total"); err != nil {
		t.Error(err)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var sawHist, sawSize bool
	for _, mf := range mfs {
		switch mf.GetName() {
		case "flotilla_journal_append_seconds":
			sawHist = true
			h := mf.GetMetric()[0].GetHistogram()
			if h.GetSampleCount() != 2 || h.GetSampleSum() < 0.0059 || h.GetSampleSum() > 0.0061 {
				t.Errorf("append_seconds count %d sum %g, want 2 and 0.006", h.GetSampleCount(), h.GetSampleSum())
			}
		case "flotilla_journal_size_bytes":
			sawSize = true
			size, _ := s.Size()
			if got := mf.GetMetric()[0].GetGauge().GetValue(); got != float64(size) || got <= 0 {
				t.Errorf("size_bytes = %g, want %d", got, size)
			}
		}
	}
	if !sawHist || !sawSize {
		t.Errorf("histogram gathered %v, size gathered %v; want both", sawHist, sawSize)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}

	// Close unregisters, so the same registry can serve a reopened store.
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("after Close %d metrics gathered (%v), want 0", n, err)
	}
	openAt(t, path, store.WithMetrics(reg))
}

// A store written before the id log existed kept its events in the events
// bucket and indexed their ids in the event_ids bucket (id -> sequence):
// the events move into the log, their ids still dedupe, and the old index
// is dropped.
func TestOpenMovesTheLegacyIDIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := event(t, "old-id").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		ids, err := tx.CreateBucketIfNotExists([]byte("event_ids"))
		if err != nil {
			return err
		}
		evs, err := tx.CreateBucketIfNotExists([]byte("events"))
		if err != nil {
			return err
		}
		key := make([]byte, 8)
		binary.BigEndian.PutUint64(key, 1)
		if err := evs.Put(key, raw); err != nil {
			return err
		}
		return ids.Put([]byte("old-id"), key)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	if ok, err := s.Has(ctx, "old-id"); !ok || err != nil {
		t.Errorf("Has(old-id) = %v, %v; want true", ok, err)
	}
	recs, err := s.Append(ctx, event(t, "old-id"), event(t, "new-id"))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Event.ID() != "new-id" || recs[0].Seq != 2 {
		t.Errorf("Append recorded %v, want new-id only, as 2", recs)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	_ = db.View(func(tx *bolt.Tx) error {
		for _, b := range []string{"events", "event_ids"} {
			if tx.Bucket([]byte(b)) != nil {
				t.Errorf("bucket %s is still there", b)
			}
		}
		return nil
	})
}
