package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The event log is the journal on disk: a directory of segment files, each
// named by the sequence number of its first record, holding records back to
// back:
//
//	u32 length of the body | u32 CRC-32C of the body |
//	body: u64 seq | u16 id length | id | event as CloudEvents JSON
//
// (little-endian). A commit is one write and one fdatasync: records go into
// space the log zero-filled beforehand, so the sync flushes data only and
// no file metadata; a length of 0 marks the end. At open the log is scanned
// (streamed, a window at a time); a torn or corrupt record at the tail of
// the last segment (a crash during a write that was never acknowledged)
// ends the log and is zeroed, but only if no intact record follows it.
// Damage with intact records after it is not a crash: the log refuses to
// open, and Repair keeps every intact record.
const (
	recordHeader = 8  // length + CRC
	bodyHeader   = 10 // seq + id length
	// zeroChunk is how far ahead of the last record the log zero-fills.
	zeroChunk = 1 << 20
	// defaultSegmentSize is the size from which the log starts a new
	// segment.
	defaultSegmentSize = 64 << 20
	// maxSegmentSize keeps offsets in a segment within 32 bits, with room
	// for the batch that crosses it.
	maxSegmentSize = 1 << 30
	segmentSuffix  = ".log"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a log that cannot be read back as written.
var errCorrupt = errors.New("journal log is corrupt")

// logRecord is one event as the log stores it.
type logRecord struct {
	seq uint64
	id  string
	raw []byte // CloudEvents JSON
}

// segment is one file of the log.
type segment struct {
	first   uint64 // seq of its first record
	f       *os.File
	offsets []uint32 // offsets[i] is where record first+i starts
	size    int64    // end of the last record
	zeroed  int64    // the file is allocated and zero beyond size up to here (writer only)
	// written is when a record was last written to it (its file's
	// modification time for a segment found at open); started is when this
	// process started writing it (or opened it), for rolling on age.
	written, started time.Time
}

// eventLog appends records (one writer) and reads them (any goroutine).
// Readers see a record only once it is synced.
type eventLog struct {
	dir         string
	segmentSize int64

	mu   sync.RWMutex // guards segs, each segment's offsets, size and written, and last
	segs []*segment
	last uint64 // seq of the last synced record; 0 if none
	// files is held (read) by readers while they read segment files, and
	// (write) by removeFront while it closes the files it removes.
	files sync.RWMutex

	now func() time.Time
	// rollAfter starts a new segment once the current one has been written
	// this long, so that retention and the dedupe window, which go a segment
	// at a time, are not held up by a quiet log. 0: only by size.
	rollAfter time.Duration
	// noSync skips the sync of each write (WithoutSync).
	noSync bool

	buf []byte // the writer's encoding buffer
}

// recordFunc is called for every record found at open, in order, with the
// segment it is in.
type recordFunc func(seg *segment, seq uint64, id string)

// openLog opens the log in dir, creating dir if needed, and calls fn for
// every record in order (to rebuild indexes). It logs a torn tail it zeroes
// to logger.
func openLog(dir string, segmentSize int64, logger *slog.Logger, fn recordFunc) (*eventLog, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("creating journal directory: %w", err)
		}
		// The new directory's entry must survive a crash as well.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	l := &eventLog{dir: dir, segmentSize: segmentSize, now: time.Now}
	firsts, err := segmentFiles(dir)
	if err != nil {
		return nil, err
	}
	for i, first := range firsts {
		if i == 0 {
			// Retention may have removed the records before it.
			l.last = first - 1
		} else if first != l.last+1 {
			_ = l.close()
			return nil, fmt.Errorf("%w: segment %s follows record %d; %s", errCorrupt, filepath.Base(segmentPath(dir, first)), l.last, repairHint(dir))
		}
		var next uint64
		if i+1 < len(firsts) {
			next = firsts[i+1]
		}
		seg, err := openSegment(dir, first, next, logger, fn)
		if err != nil {
			_ = l.close()
			return nil, err
		}
		l.segs = append(l.segs, seg)
		if n := len(seg.offsets); n > 0 {
			l.last = first + uint64(n) - 1
		}
	}
	return l, nil
}

// repairHint tells how to get past damage in the journal in dir.
func repairHint(dir string) string {
	return fmt.Sprintf("run 'flotilla store repair --data-dir %s' to keep every intact record", filepath.Dir(dir))
}

// segmentFiles lists the first sequence numbers of the segments in dir, in
// order.
func segmentFiles(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing journal: %w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), segmentSuffix)
		if !ok {
			continue
		}
		first, err := strconv.ParseUint(name, 10, 64)
		if err != nil || first == 0 {
			return nil, fmt.Errorf("%w: unexpected file %s", errCorrupt, e.Name())
		}
		firsts = append(firsts, first)
	}
	slices.Sort(firsts)
	return firsts, nil
}

func segmentPath(dir string, first uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", first, segmentSuffix))
}

// openSegment scans a segment, streaming it. next is the seq of the next
// segment's first record, 0 if this is the last segment.
//
// What follows the last intact record is either zeros (the space allocated
// ahead), or a write that a crash cut short, or damage. The log zeroes it
// (a torn tail: never acknowledged) only if no intact record follows it:
// only in the last segment (the next segment's records follow an earlier
// one's; a crash never tears a segment the log has moved on from), and only
// if no intact record follows in it. Otherwise it refuses to open rather
// than drop acknowledged records, and names the repair command.
func openSegment(dir string, first, next uint64, logger *slog.Logger, fn recordFunc) (*segment, error) {
	path := segmentPath(dir, first)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("opening journal segment: %w", err)
	}
	seg, err := scanSegment(f, path, first, next, logger, fn)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return seg, nil
}

// scanSegment is openSegment on the open file f.
func scanSegment(f *os.File, path string, first, next uint64, logger *slog.Logger, fn recordFunc) (*segment, error) {
	r, err := newSegmentReader(f, path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading journal segment %s: %w", path, err)
	}
	seg := &segment{first: first, f: f, written: fi.ModTime(), started: time.Now()}
	var off int64
	seq := first
	for {
		rec, ok, err := r.record(off, seq, seq)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		id, err := r.id(off, rec)
		if err != nil {
			return nil, err
		}
		fn(seg, seq, id)
		seg.offsets = append(seg.offsets, uint32(off))
		off += rec.size
		seq++
	}
	seg.size = off
	seg.zeroed = r.size
	at, after, found, lastNonZero, err := r.findRecord(off, seq)
	if err != nil {
		return nil, err
	}
	if found {
		return nil, fmt.Errorf("%w: segment %s: record %d at offset %d is damaged, and intact records follow it (record %d at offset %d); stopping rather than dropping them: %s",
			errCorrupt, path, seq, off, after.seq, at, repairHint(filepath.Dir(path)))
	}
	if next != 0 && next != seq {
		return nil, fmt.Errorf("%w: segment %s: record %d at offset %d is damaged or missing, and the next segment starts at record %d: %s",
			errCorrupt, path, seq, off, next, repairHint(filepath.Dir(path)))
	}
	if next != 0 && lastNonZero >= off {
		return nil, fmt.Errorf("%w: segment %s: damaged bytes at offset %d, after its last record %d, where zeros should be (the next segment starts at record %d): %s",
			errCorrupt, path, off, seq-1, next, repairHint(filepath.Dir(path)))
	}
	if lastNonZero >= off {
		// A write that was cut short by a crash: never acknowledged.
		if err := zeroFill(f, off, r.size-off); err != nil {
			return nil, err
		}
		logger.Warn("zeroed a torn write at the end of the journal", "segment", path, "offset", off, "bytes", lastNonZero+1-off)
	}
	return seg, nil
}

// nextRecord returns the body of the record at the start of b if it is whole,
// intact and numbered seq.
func nextRecord(b []byte, seq uint64) ([]byte, bool) {
	if len(b) < recordHeader {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint32(b))
	if n < bodyHeader || n > len(b)-recordHeader {
		return nil, false
	}
	body := b[recordHeader : recordHeader+n]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(b[4:]) {
		return nil, false
	}
	if binary.LittleEndian.Uint64(body) != seq || int(binary.LittleEndian.Uint16(body[8:])) > n-bodyHeader {
		return nil, false
	}
	return body, true
}

// zeroFill writes n zero bytes at off and syncs them.
func zeroFill(f *os.File, off, n int64) error {
	if err := writeZeros(f, off, n); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing journal segment: %w", err)
	}
	return nil
}

var zeros = make([]byte, zeroChunk)

func writeZeros(f *os.File, off, n int64) error {
	for n > 0 {
		c := min(n, int64(len(zeros)))
		if _, err := f.WriteAt(zeros[:c], off); err != nil {
			return fmt.Errorf("zero-filling journal segment: %w", err)
		}
		off, n = off+c, n-c
	}
	return nil
}

// lastSeq returns the seq of the last synced record.
func (l *eventLog) lastSeq() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.last
}

// append writes recs, numbered from lastSeq()+1 on, and syncs them. Only
// one goroutine may call it. After an error the log is in an unknown state
// on disk and must not be appended to again.
func (l *eventLog) append(recs []logRecord) error {
	if len(recs) == 0 {
		return nil
	}
	seg, err := l.segmentFor(recs[0].seq)
	if err != nil {
		return err
	}
	buf := l.buf[:0]
	offsets := make([]uint32, len(recs))
	for i, r := range recs {
		offsets[i] = uint32(seg.size + int64(len(buf)))
		buf = encodeRecord(buf, r)
	}
	l.buf = buf
	end := seg.size + int64(len(buf))
	if end > seg.zeroed {
		// Allocate ahead, in the same sync: one metadata flush per chunk.
		zeroed := (end + zeroChunk - 1) / zeroChunk * zeroChunk
		if err := writeZeros(seg.f, seg.zeroed, zeroed-seg.zeroed); err != nil {
			return err
		}
		seg.zeroed = zeroed
	}
	if _, err := seg.f.WriteAt(buf, seg.size); err != nil {
		return fmt.Errorf("writing journal: %w", err)
	}
	if !l.noSync {
		if err := fdatasync(seg.f); err != nil {
			return fmt.Errorf("syncing journal: %w", err)
		}
	}
	l.mu.Lock()
	seg.offsets = append(seg.offsets, offsets...)
	seg.size = end
	seg.written = l.now()
	l.last = recs[len(recs)-1].seq
	l.mu.Unlock()
	return nil
}

// lastSegment returns the first seq of the segment written last.
func (l *eventLog) lastSegment() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return 0
	}
	return l.segs[len(l.segs)-1].first
}

// segmentFor returns the segment that the record numbered seq goes to,
// starting a new one when the current one is full.
func (l *eventLog) segmentFor(seq uint64) (*segment, error) {
	l.mu.RLock()
	var cur *segment
	if len(l.segs) > 0 {
		cur = l.segs[len(l.segs)-1]
	}
	l.mu.RUnlock()
	if cur != nil && (len(cur.offsets) == 0 || cur.size < l.segmentSize && !l.old(cur)) {
		return cur, nil
	}
	f, err := os.OpenFile(segmentPath(l.dir, seq), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("starting journal segment: %w", err)
	}
	if err := syncDir(l.dir); err != nil {
		_ = f.Close()
		return nil, err
	}
	now := l.now()
	seg := &segment{first: seq, f: f, written: now, started: now}
	l.mu.Lock()
	l.segs = append(l.segs, seg)
	l.mu.Unlock()
	return seg, nil
}

// old reports whether seg has been written long enough to roll over.
func (l *eventLog) old(seg *segment) bool {
	return l.rollAfter > 0 && l.now().Sub(seg.started) >= l.rollAfter
}

func encodeRecord(buf []byte, r logRecord) []byte {
	n := bodyHeader + len(r.id) + len(r.raw)
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(n))
	buf = binary.LittleEndian.AppendUint32(buf, 0) // CRC, below
	buf = binary.LittleEndian.AppendUint64(buf, r.seq)
	buf = binary.LittleEndian.AppendUint16(buf, uint16(len(r.id)))
	buf = append(buf, r.id...)
	buf = append(buf, r.raw...)
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+recordHeader:], crcTable))
	return buf
}

// read calls fn with up to limit (all if <= 0) records after seq, in order.
// The bytes fn gets are only valid during the call.
func (l *eventLog) read(after uint64, limit int, fn func(seq uint64, raw []byte) error) error {
	type span struct {
		seg        *segment
		offsets    []uint32
		size       int64
		from, upTo int // record indexes, upTo exclusive
	}
	var spans []span
	l.files.RLock()
	defer l.files.RUnlock()
	l.mu.RLock()
	i := max(sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > after+1 })-1, 0)
	next, left := after+1, limit
	if after >= l.last {
		l.mu.RUnlock()
		return nil
	}
	if len(l.segs) > 0 && next < l.segs[0].first {
		next = l.segs[0].first // removed by retention
	}
	for ; i >= 0 && i < len(l.segs) && next <= l.last && (limit <= 0 || left > 0); i++ {
		seg := l.segs[i]
		from := int(next - seg.first)
		upTo := len(seg.offsets)
		if from >= upTo {
			continue
		}
		if limit > 0 {
			upTo = min(upTo, from+left)
			left -= upTo - from
		}
		spans = append(spans, span{seg: seg, offsets: seg.offsets, size: seg.size, from: from, upTo: upTo})
		next = seg.first + uint64(upTo)
	}
	l.mu.RUnlock()

	for _, sp := range spans {
		end := sp.size
		if sp.upTo < len(sp.offsets) {
			end = int64(sp.offsets[sp.upTo])
		}
		start := int64(sp.offsets[sp.from])
		data := make([]byte, end-start)
		if _, err := sp.seg.f.ReadAt(data, start); err != nil {
			return fmt.Errorf("reading journal: %w", err)
		}
		for j := sp.from; j < sp.upTo; j++ {
			seq := sp.seg.first + uint64(j)
			off := int64(sp.offsets[j]) - start
			body, ok := nextRecord(data[off:], seq)
			if !ok {
				return fmt.Errorf("%w: record %d does not read back", errCorrupt, seq)
			}
			idLen := int(binary.LittleEndian.Uint16(body[8:]))
			if err := fn(seq, body[bodyHeader+idLen:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// segmentInfo describes a segment for retention.
type segmentInfo struct {
	first, last uint64 // its records; last = first-1 if none
	written     time.Time
	size        int64
}

// segments describes the segments of the log, oldest first.
func (l *eventLog) segments() []segmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	infos := make([]segmentInfo, len(l.segs))
	for i, s := range l.segs {
		infos[i] = segmentInfo{first: s.first, last: s.first + uint64(len(s.offsets)) - 1, written: s.written, size: s.size}
	}
	return infos
}

// first returns the seq of the first record the log keeps (lastSeq()+1 if
// it keeps none).
func (l *eventLog) first() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.segs) == 0 {
		return l.last + 1
	}
	return l.segs[0].first
}

// removeFront closes and deletes the n oldest segments, never the last one.
// The caller has made the new start of the log durable first (see
// Store.Compact), so that a crash in between only leaves files that the
// next open deletes.
func (l *eventLog) removeFront(n int) error {
	l.files.Lock()
	defer l.files.Unlock()
	l.mu.Lock()
	n = min(n, len(l.segs)-1)
	if n <= 0 {
		l.mu.Unlock()
		return nil
	}
	gone := slices.Clone(l.segs[:n])
	l.segs = slices.Delete(l.segs, 0, n)
	l.mu.Unlock()
	var errs []error
	for _, s := range gone {
		errs = append(errs, s.f.Close(), os.Remove(s.f.Name()))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("removing journal segments: %w", err)
	}
	return syncDir(l.dir)
}

// removeBefore deletes the segment files in dir whose records all come
// before start: what a compaction that a crash cut short left behind. It
// is called before the log is opened.
func removeBefore(dir string, start uint64) error {
	firsts, err := segmentFiles(dir)
	if err != nil || start <= 1 {
		return err
	}
	removed := false
	for i := 0; i+1 < len(firsts) && firsts[i+1] <= start; i++ {
		if err := os.Remove(segmentPath(dir, firsts[i])); err != nil {
			return fmt.Errorf("removing journal segment: %w", err)
		}
		removed = true
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

// size returns the bytes of records in the log.
func (l *eventLog) size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

func (l *eventLog) close() error {
	var errs []error
	for _, s := range l.segs {
		errs = append(errs, s.f.Close())
	}
	return errors.Join(errs...)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing journal directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing journal directory: %w", err)
	}
	return nil
}
