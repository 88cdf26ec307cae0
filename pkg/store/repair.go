package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// TypeJournalDamaged is the CloudEvents type of the tombstone [Repair]
// writes in place of a record it could not read back, under the record's
// own sequence number, so that the journal stays gapless and consumers'
// cursors stay valid. Its data is a [Damaged].
const TypeJournalDamaged = "dev.flotilla.journal.damaged.v1"

// TombstoneSource is the CloudEvents source of the tombstones Repair writes.
const TombstoneSource = "/flotilla/store"

// Damaged is the payload of a tombstone: which record it replaces, where
// that record was and why it was replaced.
type Damaged struct {
	Seq     uint64 `json:"seq"`
	Segment string `json:"segment"` // file name of the segment
	Offset  int64  `json:"offset"`  // byte offset in the segment where the damage starts
	Reason  string `json:"reason"`
}

// DamagedRange is a run of records Repair replaced with tombstones, all for
// the same reason.
type DamagedRange struct {
	First, Last uint64 // sequence numbers, inclusive
	Segment     string // file name of the segment
	Offset      int64  // byte offset in the segment where the damage starts
	Reason      string
}

// RepairReport says what Repair did.
type RepairReport struct {
	// Kept counts the intact records copied, each under its own sequence
	// number.
	Kept uint64
	// Replaced lists the records, damaged or missing, replaced by
	// tombstones of type [TypeJournalDamaged].
	Replaced []DamagedRange
	// Zeroed counts the damaged bytes dropped that held no record to
	// replace: a write torn at the tail (as Open would drop it), or damage
	// after the last record of a segment or between two records.
	Zeroed int64
	// LastSeq is the sequence number of the journal's last record.
	LastSeq uint64
	// Backup is where the damaged journal was moved; "" if Repair found
	// nothing to change and left it in place.
	Backup string
}

// Tombstones counts the records replaced by tombstones.
func (r RepairReport) Tombstones() uint64 {
	var n uint64
	for _, d := range r.Replaced {
		n += d.Last - d.First + 1
	}
	return n
}

// repairBatch bounds the bytes Repair holds before it writes them.
const repairBatch = 4 << 20

// Repair rewrites the journal of the store at path so that Open accepts it
// again, keeping every intact record. It streams each segment and copies
// every intact record under its own sequence number; for every sequence
// number whose record is damaged or missing (up to the highest consumer
// cursor, so that no number is handed out twice) it writes a tombstone of
// type [TypeJournalDamaged] with id "damaged-<seq>". A torn write at the
// tail, with no intact record after it, is dropped as Open would.
//
// The repaired journal is written to a new directory, synced, and swapped
// in: the old one is kept as [JournalDir]".damaged-<UTC time>". A crash
// between the two renames leaves no journal directory: Open then refuses
// to start (the cursors are ahead of an empty journal), and running Repair
// again finishes the swap.
//
// Repair holds the store's lock throughout: it fails, after the lock
// timeout, if flotilla is running. Options used: [WithLogger],
// [WithClock] (the backup's name, the tombstones' time), [WithLockTimeout]
// and [WithSegmentSize].
func Repair(ctx context.Context, path string, opts ...Option) (RepairReport, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	report, err := repair(ctx, path, o)
	if err != nil {
		return report, fmt.Errorf("repairing the journal of %q: %w", path, err)
	}
	return report, nil
}

func repair(ctx context.Context, path string, o options) (RepairReport, error) {
	var report RepairReport
	cursor, consumer, start, unlock, err := lockForRepair(path, o.lockTimeout)
	if err != nil {
		return report, err
	}
	defer unlock()

	dir := JournalDir(path)
	tmp := dir + ".repairing"
	if err := finishSwap(dir, tmp); err != nil {
		return report, err
	}
	var firsts []uint64
	if _, err := os.Stat(dir); err == nil {
		if firsts, err = segmentFiles(dir); err != nil {
			return report, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return report, fmt.Errorf("reading journal directory: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil { // a repair cut short while writing
		return report, fmt.Errorf("clearing %s: %w", tmp, err)
	}
	dst, err := openLog(tmp, o.segmentSize, o.logger, func(*segment, uint64, string) {})
	if err != nil {
		return report, err
	}
	// Segments retention deleted, or was about to (a crash cut it short),
	// are not missing.
	for len(firsts) > 1 && firsts[1] <= start {
		firsts = firsts[1:]
	}
	rp := &repairer{dst: dst, next: max(start, 1), report: &report, now: o.now().UTC(), logger: o.logger}
	err = rp.run(ctx, dir, firsts, cursor, consumer)
	err = errors.Join(err, dst.close())
	if err != nil {
		_ = os.RemoveAll(tmp)
		return report, err
	}
	report.LastSeq = rp.next - 1
	if len(report.Replaced) == 0 && report.Zeroed == 0 {
		return report, os.RemoveAll(tmp) // intact: leave it as it is
	}
	if err := syncDir(tmp); err != nil {
		return report, err
	}
	if dirExists(dir) {
		report.Backup = dir + ".damaged-" + rp.now.Format("20060102T150405Z")
		for i := 2; dirExists(report.Backup); i++ { // repaired twice in a second
			report.Backup = fmt.Sprintf("%s.damaged-%s-%d", dir, rp.now.Format("20060102T150405Z"), i)
		}
		if err := os.Rename(dir, report.Backup); err != nil {
			return report, fmt.Errorf("moving the damaged journal aside: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return report, fmt.Errorf("moving the repaired journal in place (finish by renaming %s to %s): %w", tmp, dir, err)
	}
	if err := syncDir(filepath.Dir(dir)); err != nil {
		return report, err
	}
	o.logger.Info("repaired the journal", "dir", dir, "kept", report.Kept, "tombstones", report.Tombstones(),
		"zeroed_bytes", report.Zeroed, "backup", report.Backup)
	return report, nil
}

// finishSwap completes a repair cut short between its two renames: the
// repaired journal, complete and synced, waits in tmp, and the journal
// directory is gone (or empty: Open made it since). A repair cut short
// before them left the journal in place: tmp is then incomplete, and
// repair starts over.
func finishSwap(dir, tmp string) error {
	if !dirExists(tmp) {
		return nil
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if entries, rerr := os.ReadDir(dir); rerr == nil && len(entries) > 0 {
			return nil // the journal is there
		}
		return fmt.Errorf("finishing an interrupted repair: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("finishing an interrupted repair: %w", err)
	}
	return syncDir(filepath.Dir(dir))
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// lockForRepair takes the state file's lock, so that no flotilla runs on the
// store during the repair, and returns the highest consumer cursor and its
// consumer, and where retention left the journal's start (0: it never
// deleted anything). A store without a state file has no cursors.
func lockForRepair(path string, timeout time.Duration) (cursor uint64, consumer string, start uint64, unlock func(), err error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, "", 0, func() {}, nil
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        timeout,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return 0, "", 0, nil, fmt.Errorf("store %q is in use by another flotilla, stop it first: %w", path, err)
	}
	if err != nil {
		return 0, "", 0, nil, fmt.Errorf("opening store %q: %w", path, err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		start = journalStart(tx)
		b := tx.Bucket(bucketCursors)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) == 8 && keySeq(v) > cursor {
				cursor, consumer = keySeq(v), string(k)
			}
			return nil
		})
	})
	if err != nil {
		_ = db.Close()
		return 0, "", 0, nil, fmt.Errorf("reading cursors: %w", err)
	}
	return cursor, consumer, start, func() { _ = db.Close() }, nil
}

// repairer copies a journal record by record into a new log.
type repairer struct {
	dst    *eventLog
	next   uint64 // the seq of the next record to write
	batch  []logRecord
	size   int // bytes in batch
	report *RepairReport
	now    time.Time
	logger *slog.Logger
	// Where the last intact record of the journal ends.
	endSegment string
	endOffset  int64
}

func (rp *repairer) run(ctx context.Context, dir string, firsts []uint64, cursor uint64, consumer string) error {
	for i, first := range firsts {
		var nextFirst uint64
		if i+1 < len(firsts) {
			nextFirst = firsts[i+1]
		}
		if err := rp.segment(ctx, dir, first, nextFirst); err != nil {
			return err
		}
	}
	if cursor >= rp.next {
		reason := fmt.Sprintf("missing or damaged: the journal's intact records end at record %d, below consumer %q's cursor %d", rp.next-1, consumer, cursor)
		if err := rp.tombstones(ctx, cursor+1, rp.endSegment, rp.endOffset, reason); err != nil {
			return err
		}
	}
	return rp.flush()
}

// segment copies the records of one segment; nextFirst is the first seq of
// the next segment, 0 if this is the last.
func (rp *repairer) segment(ctx context.Context, dir string, first, nextFirst uint64) error {
	path := segmentPath(dir, first)
	name := filepath.Base(path)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening journal segment: %w", err)
	}
	defer func() { _ = f.Close() }()
	r, err := newSegmentReader(f, path)
	if err != nil {
		return err
	}
	if first > rp.next {
		segment, off := rp.endSegment, rp.endOffset
		if segment == "" {
			segment = name
		}
		reason := fmt.Sprintf("missing: the journal skips from record %d to segment %s", rp.next-1, name)
		if err := rp.tombstones(ctx, first, segment, off, reason); err != nil {
			return err
		}
	}
	rp.endSegment, rp.endOffset = name, 0
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rec, ok, err := r.record(off, rp.next, rp.next)
		if err != nil {
			return err
		}
		if ok {
			if err := rp.keep(r, off, rec); err != nil {
				return err
			}
			off += rec.size
			rp.endOffset = off
			continue
		}
		at, after, found, lastNonZero, err := r.findRecord(off, rp.next)
		if err != nil {
			return err
		}
		if found && (nextFirst == 0 || after.seq < nextFirst) {
			if after.seq > rp.next {
				reason := fmt.Sprintf("damaged: no intact record at this offset (bad length, CRC or sequence number); the next intact one is record %d at offset %d", after.seq, at)
				if err := rp.tombstones(ctx, after.seq, name, off, reason); err != nil {
					return err
				}
			} else { // bytes that held no record: dropped
				rp.report.Zeroed += at - off
			}
			off = at
			continue
		}
		if lastNonZero >= off {
			// A write that a crash cut short at the tail, or damage after
			// the last record of an earlier segment: dropped.
			rp.report.Zeroed += lastNonZero + 1 - off
			rp.logger.Warn("dropping damaged bytes after the last intact record of a segment", "segment", path, "offset", off, "bytes", lastNonZero+1-off)
		}
		if nextFirst > rp.next {
			reason := fmt.Sprintf("missing: the segment ends here; the next segment starts at record %d", nextFirst)
			if lastNonZero >= off {
				reason = fmt.Sprintf("damaged: no intact record from this offset to the end of the segment; the next segment starts at record %d", nextFirst)
			}
			return rp.tombstones(ctx, nextFirst, name, off, reason)
		}
		return nil
	}
}

// keep copies the intact record rec at off.
func (rp *repairer) keep(r *segmentReader, off int64, rec recordInfo) error {
	id, err := r.id(off, rec)
	if err != nil {
		return err
	}
	raw, err := r.event(off, rec)
	if err != nil {
		return err
	}
	rp.report.Kept++
	return rp.add(logRecord{seq: rp.next, id: id, raw: append([]byte(nil), raw...)})
}

// tombstones writes a tombstone for every seq from rp.next up to upTo,
// exclusive.
func (rp *repairer) tombstones(ctx context.Context, upTo uint64, segment string, off int64, reason string) error {
	if upTo <= rp.next {
		return nil
	}
	rp.report.Replaced = append(rp.report.Replaced, DamagedRange{First: rp.next, Last: upTo - 1, Segment: segment, Offset: off, Reason: reason})
	rp.logger.Warn("replacing journal records with tombstones", "first", rp.next, "last", upTo-1, "segment", segment, "offset", off, "reason", reason)
	for rp.next < upTo {
		if err := ctx.Err(); err != nil {
			return err
		}
		e, err := tombstone(Damaged{Seq: rp.next, Segment: segment, Offset: off, Reason: reason}, rp.now)
		if err != nil {
			return err
		}
		raw, err := e.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding tombstone %d: %w", rp.next, err)
		}
		if err := rp.add(logRecord{seq: rp.next, id: e.ID(), raw: raw}); err != nil {
			return err
		}
	}
	return nil
}

// tombstone builds the event that stands in for the damaged record d.Seq.
func tombstone(d Damaged, now time.Time) (cloudevents.Event, error) {
	e := cloudevents.NewEvent()
	e.SetID(fmt.Sprintf("damaged-%d", d.Seq))
	e.SetSource(TombstoneSource)
	e.SetType(TypeJournalDamaged)
	e.SetTime(now)
	if err := e.SetData(cloudevents.ApplicationJSON, d); err != nil {
		return e, fmt.Errorf("encoding tombstone %d: %w", d.Seq, err)
	}
	return e, nil
}

// add queues rec, numbered rp.next, for the new log.
func (rp *repairer) add(rec logRecord) error {
	rp.batch = append(rp.batch, rec)
	rp.size += len(rec.raw) + len(rec.id)
	rp.next++
	if rp.size >= repairBatch || len(rp.batch) >= migrateBatch {
		return rp.flush()
	}
	return nil
}

func (rp *repairer) flush() error {
	if len(rp.batch) == 0 {
		return nil
	}
	if err := rp.dst.append(rp.batch); err != nil {
		return fmt.Errorf("writing the repaired journal: %w", err)
	}
	clear(rp.batch)
	rp.batch, rp.size = rp.batch[:0], 0
	return nil
}
