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
}

// eventLog appends records (one writer) and reads them (any goroutine).
// Readers see a record only once it is synced.
type eventLog struct {
	dir         string
	segmentSize int64

	mu   sync.RWMutex // guards segs, each segment's offsets and size, and last
	segs []*segment
	last uint64 // seq of the last synced record; 0 if none

	buf []byte // the writer's encoding buffer
}

// openLog opens the log in dir, creating dir if needed, and calls fn for
// every record in order (to rebuild indexes). It logs a torn tail it zeroes
// to logger.
func openLog(dir string, segmentSize int64, logger *slog.Logger, fn func(seq uint64, id string)) (*eventLog, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("creating journal directory: %w", err)
		}
		// The new directory's entry must survive a crash as well.
		if err := syncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	l := &eventLog{dir: dir, segmentSize: segmentSize}
	firsts, err := segmentFiles(dir)
	if err != nil {
		return nil, err
	}
	for i, first := range firsts {
		if l.last != 0 && first != l.last+1 || l.last == 0 && i > 0 {
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
func openSegment(dir string, first, next uint64, logger *slog.Logger, fn func(seq uint64, id string)) (*segment, error) {
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
func scanSegment(f *os.File, path string, first, next uint64, logger *slog.Logger, fn func(seq uint64, id string)) (*segment, error) {
	r, err := newSegmentReader(f, path)
	if err != nil {
		return nil, err
	}
	seg := &segment{first: first, f: f}
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
		fn(seq, id)
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
	if err := fdatasync(seg.f); err != nil {
		return fmt.Errorf("syncing journal: %w", err)
	}
	l.mu.Lock()
	seg.offsets = append(seg.offsets, offsets...)
	seg.size = end
	l.last = recs[len(recs)-1].seq
	l.mu.Unlock()
	return nil
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
	if cur != nil && (cur.size < l.segmentSize || len(cur.offsets) == 0) {
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
	seg := &segment{first: seq, f: f}
	l.mu.Lock()
	l.segs = append(l.segs, seg)
	l.mu.Unlock()
	return seg, nil
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
	l.mu.RLock()
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].first > after+1 }) - 1
	next, left := after+1, limit
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
